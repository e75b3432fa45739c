//go:build unix

package render_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nodewatch/nodewatch/internal/render"
)

// BenchmarkRenderUnchanged: what a Render of a view of 1,000 objects
// costs when the file holds its content already (the program, the
// output, reading the file and comparing): every change to the view that
// does not change the file pays it.
func BenchmarkRenderUnchanged(b *testing.B) {
	view := make([]any, 1000)
	for i := range view {
		view[i] = map[string]any{
			"id":    fmt.Sprintf("/nodes/%04d", i),
			"name":  fmt.Sprintf("node-%04d", i),
			"addr":  fmt.Sprintf("10.0.%d.%d", i/256, i%256),
			"port":  8080.0,
			"state": "UP",
			"roles": []any{"worker", "storage"},
		}
	}
	for _, c := range []struct{ name, program string }{
		{"lines", `.[] | select(.state == "UP") | "server \(.name) \(.addr):\(.port);"`},
		{"json", `.`},
	} {
		b.Run(c.name, func(b *testing.B) {
			to := filepath.Join(b.TempDir(), "out")
			targets := []render.Target{{Program: program(b, c.program), To: to}}
			renderOK(b, &render.Renderer{Targets: targets}, view)
			// A replacement, and so a reload, would fail the benchmark.
			r := &render.Renderer{Targets: targets, Reload: "exit 1"}
			b.SetBytes(int64(len(read(b, to))))
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Render(context.Background(), view, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
