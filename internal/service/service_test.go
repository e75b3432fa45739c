package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
)

// TestExposure: a warning for metrics beyond loopback, and one for the
// Curator served beyond loopback without client certificates (TLS
// without a client CA, or plaintext); none for loopback or mTLS.
func TestExposure(t *testing.T) {
	tls := &dial.ServerTLS{Cert: dial.File{Path: "srv.pem"}, Key: dial.File{Path: "srv.key"}}
	mtls := &dial.ServerTLS{Cert: dial.File{Path: "srv.pem"}, Key: dial.File{Path: "srv.key"}, ClientCA: dial.File{Path: "ca.pem"}}
	tests := []struct {
		name string
		p    Process
		want []string // the start of each warning
	}{
		{name: "loopback", p: Process{Listen: "127.0.0.1:7835", MetricsAddr: "localhost:9090"}},
		{name: "loopback, TLS", p: Process{Listen: "[::1]:7835", Config: server.Config{TLS: tls}}},
		{name: "mTLS beyond loopback", p: Process{Listen: "0.0.0.0:7835", Config: server.Config{TLS: mtls}}},
		{name: "metrics beyond loopback", p: Process{Listen: "127.0.0.1:7835", MetricsAddr: ":9090"},
			want: []string{"--metrics-addr :9090: metrics are served beyond loopback"}},
		{name: "TLS beyond loopback", p: Process{Listen: "10.0.0.1:7835", Config: server.Config{TLS: tls}},
			want: []string{"--listen 10.0.0.1:7835: TLS without client certificates (no --listen-cacert) beyond loopback"}},
		{name: "plaintext beyond loopback, and metrics", p: Process{Listen: ":7835", MetricsAddr: "0.0.0.0:9090"},
			want: []string{"--metrics-addr 0.0.0.0:9090: metrics are served beyond loopback", "--listen :7835: plaintext beyond loopback (--insecure)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, w := range exposure(tt.p) {
				prefix := w
				for _, want := range tt.want {
					if strings.HasPrefix(w, want) {
						prefix = want
					}
				}
				got = append(got, prefix)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunWarnsOfExposure: Run logs what exposure says at warn, once it
// listens.
func TestRunWarnsOfExposure(t *testing.T) {
	ep := etcdtest.Start(t)
	var log testkit.Buffer
	p := Process{
		Config:      server.Config{Log: slog.New(slog.NewTextHandler(&log, nil)), DrainTimeout: time.Second},
		EtcdConfig:  etcdkv.Config{Endpoints: []string{ep}, DialTimeout: testkit.Timeout},
		Listen:      "127.0.0.1:0",
		MetricsAddr: "0.0.0.0:0",
	}
	p.Prefix = "/nodes/"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, p) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	const want = `level=WARN msg="--metrics-addr 0.0.0.0:0: metrics are served beyond loopback`
	testkit.Eventually(t, func() error {
		if !strings.Contains(log.String(), want) {
			return errors.New("no warning in:\n" + log.String())
		}
		return nil
	})
}
