package jsondoc

import "unicode/utf8"

// AppendString appends s encoded as a JSON string exactly as gojq.Marshal
// encodes it (TestAppendString checks): ", \ and control characters
// escaped (\b \f \n \r \t, else \u00XX, DEL included), invalid UTF-8 as
// \ufffd, everything else as it is. It allocates nothing but dst's growth.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i += plainLen(s[i:]); i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if ' ' <= b && b <= '~' && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = AppendEscape(append(dst, s[start:i]...), b)
			i++
			start = i
			continue
		}
		var c rune
		var size int
		switch v := any(s).(type) {
		case string:
			c, size = utf8.DecodeRuneInString(v[i:])
		case []byte:
			c, size = utf8.DecodeRune(v[i:])
		default:
			c, size = utf8.DecodeRuneInString(string(s[i:]))
		}
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendEscape appends the JSON escape of the ASCII byte c: \b \f \n \r \t
// \" \\ in short, any other as \u00xx (lower-case hex), as gojq and
// protojson write them. AppendString and the curator's node writer, which
// escape different sets of bytes, share it.
func AppendEscape(dst []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	if int(c) < len(shortEscapes) && shortEscapes[c] != 0 {
		return append(dst, '\\', shortEscapes[c])
	}
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
}

// shortEscapes holds, by byte, the letter of its two-byte escape, if it
// has one.
var shortEscapes = [...]byte{'\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't', '"': '"', '\\': '\\'}
