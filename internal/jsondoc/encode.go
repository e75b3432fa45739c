package jsondoc

import "unicode/utf8"

// AppendString appends s encoded as a JSON string exactly as gojq.Marshal
// encodes it (TestAppendString checks): ", \ and control characters
// escaped (\b \f \n \r \t, else \u00XX, DEL included), invalid UTF-8 as
// \ufffd, everything else as it is. It allocates nothing but dst's growth.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
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
			dst = append(dst, s[start:i]...)
			switch b {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
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
