// Package embedetcd runs a single-member etcd inside the process, on
// loopback, for `nodewatch serve --dev` and for tests. It is a real etcd
// server (go.etcd.io/etcd/server/v3/embed), not a stand-in.
package embedetcd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// Endpoint is the client URL, e.g. http://127.0.0.1:40123 (https://
	// with TLS).
	Endpoint string
}

// Config describes the embedded server.
type Config struct {
	// Dir holds the data; it must exist or be creatable.
	Dir string
	// ClientAddr is host:port to listen on for clients; "" picks a free
	// loopback port.
	ClientAddr string
	// LogLevel is etcd's own log level; "" means "warn". Its log goes to
	// etcd.log in Dir, never to nodewatch's stdout or stderr.
	LogLevel string
	// TLS, when set, serves clients TLS only (an https:// Endpoint).
	TLS *TLS

	// For a member of a multi-member cluster (tests of failover); all
	// empty for a single member.
	//
	// Name is the member's name; "" means "nodewatch".
	Name string
	// PeerAddr is host:port for peer traffic; "" picks a free port.
	PeerAddr string
	// AdvertisePeerAddr is host:port the other members reach this one at,
	// when it is not PeerAddr (the fault suite puts forwarders between
	// members); "" means PeerAddr.
	AdvertisePeerAddr string
	// InitialCluster lists every member as name=http://peer,...; ""
	// means this member alone. The members of a new cluster must be
	// started concurrently: Start waits for a quorum.
	InitialCluster string
}

// TLS is how the server's client URL serves TLS.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM).
	CertFile, KeyFile string
	// ClientCAFile, when set, makes client certificates required: they
	// must be signed by a CA in this file (mTLS).
	ClientCAFile string
}

// Start starts etcd and waits until it serves clients, up to a minute.
// The caller must Close it.
//
// A port that Start picks was free a moment before etcd binds it; another
// process (a test beside this one, a connection's own port) may take it in
// between. Start then tries again with other ports, a few times.
func Start(cfg Config) (*Server, error) {
	picked := cfg.ClientAddr == "" || cfg.PeerAddr == ""
	for attempt := 1; ; attempt++ {
		s, err := start(cfg)
		if err == nil || !picked || !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			return s, err
		}
	}
}

func start(cfg Config) (*Server, error) {
	clientAddr := cfg.ClientAddr
	if clientAddr == "" {
		var err error
		if clientAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	peerAddr := cfg.PeerAddr
	if peerAddr == "" {
		var err error
		if peerAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	ec := embed.NewConfig()
	ec.Dir = cfg.Dir
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "nodewatch"
	}
	ec.LogLevel = cfg.LogLevel
	if ec.LogLevel == "" {
		ec.LogLevel = "warn"
	}
	ec.LogOutputs = []string{filepath.Join(cfg.Dir, "etcd.log")}
	cu := url.URL{Scheme: "http", Host: clientAddr}
	if cfg.TLS != nil {
		cu.Scheme = "https"
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile:       cfg.TLS.CertFile,
			KeyFile:        cfg.TLS.KeyFile,
			TrustedCAFile:  cfg.TLS.ClientCAFile,
			ClientCertAuth: cfg.TLS.ClientCAFile != "",
		}
	}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	apu := pu
	if cfg.AdvertisePeerAddr != "" {
		apu.Host = cfg.AdvertisePeerAddr
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{apu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
	}
	ec.UnsafeNoFsync = true // scratch data: speed over durability

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: not ready after a minute")
	}
	return &Server{etcd: e, Endpoint: cu.String()}, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() { s.etcd.Close() }

// Kill stops the server the way a crash would: no leadership transfer, no
// goodbye to the peers.
func (s *Server) Kill() {
	s.etcd.Server.HardStop()
	s.etcd.Close()
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr() (string, error) { return FreeAddrOn("127.0.0.1") }

// FreeAddrOn returns host:port, a port of host that was free a moment ago
// and that no call before it in this process returned: the kernel may
// hand a port it just freed out again, and a cluster's members, or a
// member's client and peer addresses, asked for one after another, must
// not share one (etcd refuses an initial cluster with a duplicate URL).
func FreeAddrOn(host string) (string, error) {
	for {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("find a free port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, taken := given.LoadOrStore(addr, true); !taken {
			return addr, nil
		}
	}
}

// given is every address FreeAddrOn returned.
var given sync.Map
