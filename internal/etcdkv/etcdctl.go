package etcdkv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// EtcdctlEnv describes the one change of a batch of `key` to its --exec
// handler as `etcdctl watch KEY -- CMD` describes each event to CMD
// (etcdctl/ctlv3/command/watch_command.go), in the same variables and
// the same form: the strings quoted as Go's %q quotes them.
//
//	ETCD_WATCH_REVISION=7
//	ETCD_WATCH_EVENT_TYPE="PUT"    ("DELETE" for a deletion)
//	ETCD_WATCH_KEY="/a/b"
//	ETCD_WATCH_VALUE="v1"          ("" for a deletion)
//
// Where nodewatch differs from etcdctl, it is because it does not see
// what etcdctl sees: the handler gets the line nodewatch prints, not
// etcd's event. The revision is the change's (the line's rev; etcdctl's
// is the watch response's, the same for a live change). A key that
// leaves the view because --filter no longer keeps it is a DELETE. The
// object holds the value decoded (Rules), not its bytes, so the value is
// the bytes the decoding came from where it can be undone (Stored).
//
// It satisfies handler.ChangeEnv.
type EtcdctlEnv struct {
	Rules *Rules // how values were decoded; nil: --value auto
}

// Vars names the variables Env sets.
func (EtcdctlEnv) Vars() []string {
	return []string{"ETCD_WATCH_REVISION", "ETCD_WATCH_EVENT_TYPE", "ETCD_WATCH_KEY", "ETCD_WATCH_VALUE"}
}

// Env returns the variables for the change that line, an NDJSON event
// line of key (new, updated or deleted), is; nil for any other line.
func (e EtcdctlEnv) Env(line []byte) []string {
	var ev struct {
		Type   string          `json:"type"`
		ID     string          `json:"id"`
		Object json.RawMessage `json:"object"`
		Prev   json.RawMessage `json:"prev"`
		Rev    int64           `json:"rev"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return nil
	}
	typ, obj := "PUT", ev.Object
	switch ev.Type {
	case "new", "updated":
	case "deleted":
		typ, obj = "DELETE", ev.Prev
	default:
		return nil
	}
	var kv struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(obj, &kv) // a deletion without prev: the id
	key, ok := unBytes(kv.Key)
	if !ok {
		key = []byte(ev.ID) // the key, unless Watcher.ID made it something else
	}
	var value []byte
	if typ == "PUT" {
		mode := ValueAuto
		if e.Rules != nil {
			mode = e.Rules.mode(string(key))
		}
		value = Stored(kv.Value, mode)
	}
	return []string{
		"ETCD_WATCH_REVISION=" + strconv.FormatInt(ev.Rev, 10),
		"ETCD_WATCH_EVENT_TYPE=" + strconv.Quote(typ),
		"ETCD_WATCH_KEY=" + strconv.Quote(string(key)),
		"ETCD_WATCH_VALUE=" + strconv.Quote(string(value)),
	}
}

// Stored returns the bytes that value, the JSON that an object's value
// became under mode (Object), was decoded from, where the decoding can
// be undone; where it cannot, the JSON itself:
//
//   - text and base64: the bytes stored, exactly.
//   - auto: a string is its text, or, when that text is JSON itself
//     (which auto would have decoded), the string as stored, quoted; a
//     {"base64": …} of bytes that are not UTF-8 is those bytes; other
//     JSON is as stored, compacted (exact for a value stored compact).
//     A JSON string stored with its quotes, whose text is not JSON, is
//     given without them: auto printed it as it prints that text.
//   - json: as stored, compacted.
//   - gob and query: the JSON they decoded to.
func Stored(value json.RawMessage, mode ValueMode) []byte {
	switch mode {
	case ValueText, ValueBase64, ValueAuto:
	default:
		return value
	}
	var s string
	if json.Unmarshal(value, &s) == nil {
		switch mode {
		case ValueBase64:
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return b
			}
			return value
		case ValueAuto:
			if json.Valid([]byte(s)) {
				return value
			}
		}
		return []byte(s)
	}
	if b, ok := unBytes(value); ok && mode == ValueAuto && !utf8.Valid(b) {
		return b
	}
	return value
}

// unBytes undoes Bytes: b, the JSON of a string or of {"base64": …},
// is the bytes returned.
func unBytes(b json.RawMessage) ([]byte, bool) {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return []byte(s), true
	}
	var enc map[string]string
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) || json.Unmarshal(b, &enc) != nil || len(enc) != 1 {
		return nil, false
	}
	e, ok := enc["base64"]
	if !ok {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(e)
	return raw, err == nil
}
