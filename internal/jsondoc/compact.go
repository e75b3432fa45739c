package jsondoc

import (
	"errors"
	"unicode/utf8"
)

// errNotJSON is AppendCompact's error: the caller only needs to know that
// the bytes are not one JSON value (etcd values that are not JSON are
// printed as strings).
var errNotJSON = errors.New("not a JSON value")

// AppendCompact appends src, which must be exactly one JSON value
// (surrounding space allowed), without insignificant space, and returns
// the result; for anything else it returns dst unchanged and an error.
// It accepts and makes what json.Compact does (FuzzAppendCompact checks)
// at a fraction of its cost: runs without space are copied whole, and
// nothing is called per byte.
func AppendCompact(dst, src []byte) ([]byte, error) {
	c := compactor{src: src, dst: dst}
	return c.run(dst)
}

// AppendCompactIndexed is AppendCompact that also returns the Index of
// the object src encodes: nil when src is not an object, or its compact
// encoding is 64 KiB or more. Unlike AppendCompact (and json.Compact), it
// also fails for a string that is not valid UTF-8: its callers print
// such a value another way, and need not check all of it first.
func AppendCompactIndexed(dst, src []byte) ([]byte, Index, error) {
	return appendCompactIndexed(dst, src, nil)
}

// appendCompactIndexed is AppendCompactIndexed, appending the Index to x.
func appendCompactIndexed(dst, src []byte, x Index) ([]byte, Index, error) {
	c := compactor{src: src, dst: dst, base: len(dst), indexing: true, utf8: true, index: x}
	out, err := c.run(dst)
	if err != nil || !c.indexing || len(out)-c.base > 1<<16-1 || len(c.index) == 0 {
		return out, nil, err // nil for a value that is no object, or {}
	}
	return out, c.index, nil
}

func (c *compactor) run(dst []byte) ([]byte, error) {
	c.space()
	if !c.value(0) {
		return dst, errNotJSON
	}
	c.space()
	if c.i != len(c.src) {
		return dst, errNotJSON
	}
	return append(c.dst, c.src[c.start:]...), nil
}

// compactor validates src and copies it to dst, leaving out space: start
// is where the bytes not yet copied begin. With indexing, it records the
// Index of an object at depth 0 (written at dst[base:]); indexing is
// cleared when there is none. With utf8, strings must be valid UTF-8.
type compactor struct {
	src, dst []byte
	i, start int
	utf8     bool

	indexing bool
	base     int
	index    Index
}

// space skips space, copying what came before it.
func (c *compactor) space() {
	if c.i < len(c.src) && c.src[c.i] > ' ' {
		return // no space, as in compact JSON: one comparison
	}
	j := c.i
	for j < len(c.src) && isSpace(c.src[j]) {
		j++
	}
	if j > c.i {
		c.dst = append(c.dst, c.src[c.start:c.i]...)
		c.i, c.start = j, j
	}
}

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.src) {
		return false
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.container(depth, '}', true)
	case b == '[':
		return c.container(depth, ']', false)
	case b == '"':
		return c.str()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	}
	return false
}

// container reads an object (members: keys and colons) or an array.
func (c *compactor) container(depth int, close byte, members bool) bool {
	if depth >= maxDepth {
		return false
	}
	c.i++
	c.space()
	if c.i < len(c.src) && c.src[c.i] == close {
		c.i++
		return true
	}
	for {
		if members && depth == 0 && c.indexing {
			// Where the key lands in dst: after what is copied and
			// what is pending.
			if at := len(c.dst) + c.i - c.start - c.base; at <= 1<<16-1 {
				if cap(c.index) == 0 {
					c.index = make(Index, 0, 16) // one allocation for most records
				}
				c.index = append(c.index, uint16(at))
			} else {
				c.indexing = false
			}
		}
		if members {
			if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
				return false
			}
			c.space()
			if c.i >= len(c.src) || c.src[c.i] != ':' {
				return false
			}
			c.i++
			c.space()
		}
		if !c.value(depth + 1) {
			return false
		}
		c.space()
		if c.i >= len(c.src) {
			return false
		}
		switch c.src[c.i] {
		case close:
			c.i++
			return true
		case ',':
			c.i++
			c.space()
		default:
			return false
		}
	}
}

// str reads a string: no control characters, only JSON's escapes. Bytes
// that are not UTF-8 pass, as they pass json.Compact, unless c.utf8.
func (c *compactor) str() bool {
	s := c.src
	for i := c.i + 1; i < len(s); i++ {
		if i = stringStop(s, i, c.utf8); i >= len(s) {
			break
		}
		switch b := s[i]; {
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			i += size - 1
		case b == '"':
			c.i = i + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			i++
			if i >= len(s) {
				return false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s) {
					return false
				}
				for _, h := range s[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func (c *compactor) literal(word string) bool {
	if len(c.src)-c.i < len(word) || string(c.src[c.i:c.i+len(word)]) != word {
		return false
	}
	c.i += len(word)
	return true
}

// number reads a number (numberEnd).
func (c *compactor) number() bool {
	end, bad := numberEnd(c.src, c.i)
	c.i = end
	return bad == ""
}
