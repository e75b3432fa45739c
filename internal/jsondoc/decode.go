package jsondoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// maxDepth is how deep values may nest, as in encoding/json.
const maxDepth = 10000

// Decode decodes exactly one JSON value (surrounding space allowed) into
// the tree encoding/json would make with UseNumber: map[string]any, []any
// (never nil), string, json.Number, bool or nil. It makes a fraction of
// encoding/json's allocations: the input is copied once, and every key,
// string and number without escapes is cut from that copy.
//
// For invalid input it returns an error, whose text is not
// encoding/json's.
func Decode(b []byte) (any, error) {
	d := decoder{s: string(b)}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.s) {
		return nil, d.errorf("data after the JSON value")
	}
	return v, nil
}

type decoder struct {
	s string
	i int
}

var errEnd = errors.New("unexpected end of JSON input")

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips space and returns the next byte without consuming it.
func (d *decoder) next() (byte, error) {
	d.space()
	if d.i >= len(d.s) {
		return 0, errEnd
	}
	return d.s[d.i], nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth >= maxDepth {
		return nil, d.errorf("exceeded max depth")
	}
	if d.i >= len(d.s) {
		return nil, errEnd
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == 't':
		return d.literal("true", true)
	case c == 'f':
		return d.literal("false", false)
	case c == 'n':
		return d.literal("null", nil)
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	default:
		return nil, d.errorf("invalid character %q looking for a value", c)
	}
}

// open enters the container that starts at d.i and reads on to the byte
// c its first member starts with; done: close came at once, and the
// container is read. With an error, done is false.
func (d *decoder) open(close byte) (c byte, done bool, err error) {
	d.i++ // { or [
	if c, err = d.next(); err != nil || c != close {
		return c, false, err
	}
	d.i++
	return c, true, nil
}

// more reads what follows a member of a container: close ends it (done),
// a comma goes on to the byte c the next member starts with; what names
// a member in the error for anything else. With an error, done is false.
func (d *decoder) more(close byte, what string) (c byte, done bool, err error) {
	if c, err = d.next(); err != nil {
		return c, false, err
	}
	d.i++
	switch c {
	case close:
		return c, true, nil
	case ',':
		c, err = d.next()
		return c, false, err
	}
	d.i--
	return c, false, d.errorf("invalid character %q after %s", c, what)
}

func (d *decoder) object(depth int) (any, error) {
	m := map[string]any{}
	for c, done, err := d.open('}'); !done; c, done, err = d.more('}', "an object member") {
		if err != nil {
			return nil, err
		}
		if c != '"' {
			return nil, d.errorf("invalid character %q looking for an object key", c)
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if c, err = d.next(); err != nil {
			return nil, err
		}
		if c != ':' {
			return nil, d.errorf("invalid character %q after an object key", c)
		}
		d.i++
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v // a repeated key: the last one wins, as in encoding/json
	}
	return m, nil
}

func (d *decoder) array(depth int) (any, error) {
	a := []any{}
	for _, done, err := d.open(']'); !done; _, done, err = d.more(']', "an array element") {
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	return a, nil
}

// str reads a string token. One without escapes, in valid UTF-8, is cut
// from the input; any other is left to encoding/json, so that escapes,
// surrogates and invalid bytes come out exactly as it makes them.
func (d *decoder) str() (string, error) {
	start := d.i
	d.i++ // "
	plain := true
	for ; d.i < len(d.s); d.i++ {
		switch c := d.s[d.i]; {
		case c == '"':
			d.i++
			tok := d.s[start:d.i]
			if plain {
				return tok[1 : len(tok)-1], nil
			}
			var s string
			if err := json.Unmarshal([]byte(tok), &s); err != nil {
				return "", fmt.Errorf("offset %d: %v", start, err)
			}
			return s, nil
		case c == '\\':
			plain = false
			d.i++ // the escaped byte; \u's hex digits are plain bytes
		case c < 0x20:
			return "", d.errorf("invalid character %q in string literal", c)
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && n == 1 {
				plain = false
			}
			d.i += n - 1
		}
	}
	return "", errEnd
}

func (d *decoder) literal(word string, v any) (any, error) {
	if len(d.s)-d.i < len(word) || d.s[d.i:d.i+len(word)] != word {
		return nil, d.errorf("invalid literal, want %s", word)
	}
	d.i += len(word)
	return v, nil
}

// number reads a number (numberEnd).
func (d *decoder) number() (any, error) {
	start := d.i
	end, bad := numberEnd(d.s, d.i)
	d.i = end
	if bad != "" {
		return nil, d.errorf("%s", bad)
	}
	return json.Number(d.s[start:end]), nil
}
