package curator

// Facts of the Curator's wire and of node records that both ends rely on.
const (
	// DefaultPrefix is the etcd prefix of node records unless configured
	// otherwise; a record's key is the prefix followed by the node id.
	DefaultPrefix = "/nodes/"
	// DefaultPort is the Curator's port on every Metropolis node.
	DefaultPort = 7835
	// MaxEventSize bounds the encoded size (proto.Size) of one backlog
	// WatchEvent, as the Curator does: the backlog is split between nodes
	// into events of at most this size, so only a single node larger than
	// this makes a larger event.
	MaxEventSize = 2 << 20
)
