package curator

import "github.com/nodewatch/nodewatch/internal/curator/apipb"

// For the tests of nodejson.go, which use testkit/curatortest (and so
// cannot be in package curator).

// AppendNode is appendNode.
func AppendNode(b []byte, n *apipb.Node) ([]byte, bool) { return appendNode(b, n) }

// Timestamp's range as protojson checks it.
const (
	MinTimestampSeconds = minTimestampSeconds
	MaxTimestampSeconds = maxTimestampSeconds
)

// AppendNodeWire is appendNodeWire.
func AppendNodeWire(b, wire []byte) ([]byte, string, bool) { return appendNodeWire(b, wire) }
