package jsondoc

// An Index is where the members of a compact JSON object begin: the
// offset, from the object's opening brace, of each key's opening quote,
// in document order. AppendCompactIndexed makes it as it compacts, for
// nothing; a Doc keeps the Index of its known member (an etcd key's
// value), so that a jq path into the value and the Differ find its
// members without reading through it. An object is indexed when it is
// under 64 KiB.
type Index []uint16

// Field is Field(obj, key) for the object obj indexed by x: of a key given
// twice the last counts.
func (x Index) Field(obj []byte, key string) ([]byte, bool) {
	plain := plainLen(key) == len(key)
	for k := len(x) - 1; k >= 0; k-- {
		ks := int(x[k])
		if plain {
			switch keyAt(obj, ks, key) {
			case isKey:
				return x.value(obj, k, ks+len(key)+2), true
			case notKey:
				continue
			}
		}
		if ke := stringEnd(obj, ks); keyIs(obj[ks:ke], key) {
			return x.value(obj, k, ke), true
		}
	}
	return nil, false
}

// keyAt answers whether the key whose opening quote is obj[ks] is key, a
// string of plain bytes (plainLen), from the bytes that key's length
// spans: a key that begins with other plain bytes, or with key's and not
// then a quote, is another (an escape makes at least one character).
// Bytes that may be an escape or beyond ASCII leave it to keyIs.
func keyAt[S ~string | ~[]byte](obj []byte, ks int, key S) keyAnswer {
	r := obj[ks+1:]
	if len(r) > len(key) && string(r[:len(key)]) == string(key) {
		if r[len(key)] == '"' {
			return isKey
		}
		return notKey
	}
	for j := 0; j < len(key) && j < len(r); j++ {
		if c := r[j]; c != key[j] {
			if c == '\\' || c >= 0x80 {
				return unsure
			}
			return notKey
		}
	}
	return unsure
}

type keyAnswer int

const (
	unsure keyAnswer = iota
	isKey
	notKey
)

// value returns the value of member k, whose key ends at ke.
func (x Index) value(obj []byte, k, ke int) []byte {
	return obj[ke+1 : x.end(obj, k)]
}

// end returns where member k of the compact object obj, indexed by x,
// ends: the comma before the next member, or the closing brace.
func (x Index) end(obj []byte, k int) int {
	if k+1 < len(x) {
		return int(x[k+1]) - 1
	}
	return len(obj) - 1
}
