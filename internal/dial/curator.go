package dial

import (
	"google.golang.org/grpc"
)

// CuratorConfig says how to reach a Metropolis Curator (or `nodewatch
// serve`).
type CuratorConfig struct {
	// TLS secures the connections and words their failures; nil means
	// plaintext. Its Config is adapted to Metropolis with CuratorTLS: with
	// roots and no server name, the chain only is checked.
	TLS *TLS
	// Keepalive says how often a connection must prove that it is alive
	// (zero fields: the defaults).
	Keepalive Keepalive
	// Options are added to every connection's.
	Options []grpc.DialOption
}

// Curator returns a client connection to target (host:port) as cfg says:
// its TLS (with failures explained in the terms of the flags, the server
// named "the server": the caller names the endpoint), its keepalive. It
// does not connect; gRPC does when the connection is first used. The
// caller closes it. The error is grpc.NewClient's, for a bad target.
func Curator(target string, cfg CuratorConfig) (*grpc.ClientConn, error) {
	return grpc.NewClient(target, cfg.options()...)
}

// options are the dial options of cfg.
func (cfg CuratorConfig) options() []grpc.DialOption {
	t := cfg.TLS
	if t != nil && t.Config != nil {
		adapted := *t
		adapted.Config = CuratorTLS(t.Config.Clone())
		t = &adapted
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(t.Credentials(false))}, cfg.Keepalive.DialOptions()...)
	opts = append(opts, receiveOptions()...)
	return append(opts, cfg.Options...)
}
