//go:build linux

package main

import (
	"math"
	"strings"
	"testing"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// TestFleetRecords: a sized fleet's records have their size (within
// sizeSlack), distinct ids of the simulator's form, read back with
// curator.DecodeRecord under their key's id, and about half of them are UP.
func TestFleetRecords(t *testing.T) {
	const n = 2000
	for _, s := range shapes[1:] {
		t.Run(s.name, func(t *testing.T) {
			f := newFleet(s.size, 7)
			ids := map[string]bool{}
			up, lo, hi := 0, math.MaxInt, 0
			for range n {
				node := f.next()
				v, err := curator.EncodeRecord(node)
				if err != nil {
					t.Fatal(err)
				}
				lo, hi = min(lo, len(v)), max(hi, len(v))
				if d := math.Abs(float64(len(v)-s.size)) / float64(s.size); d > sizeSlack {
					t.Fatalf("record of %d bytes, want %d ± %.0f%%: %s", len(v), s.size, sizeSlack*100, v)
				}
				if !strings.HasPrefix(node.Id, "metropolis-") || len(node.Id) != len("metropolis-")+32 || ids[node.Id] {
					t.Fatalf("id %q: not of the simulator's form, or repeated", node.Id)
				}
				ids[node.Id] = true
				got, err := curator.DecodeRecord(node.Id, v)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != node.State {
					t.Fatalf("decoded state %v, wrote %v", got.State, node.State)
				}
				if got.State == commonpb.NodeState_NODE_STATE_UP {
					up++
				}
			}
			if up < n*2/5 || up > n*3/5 {
				t.Errorf("%d of %d records UP, want about half", up, n)
			}
			t.Logf("%s: %d-%d bytes, %d labels, %d of %d UP", s.label(), lo, hi, f.labels, up, n)
		})
	}
}

// TestChanges: changes keep a record's id and about its size, flip its
// state both ways, and sometimes put the bytes etcd already holds.
func TestChanges(t *testing.T) {
	f := newFleet(600, 1)
	var nodes []*apipb.Node
	for range 10 {
		nodes = append(nodes, f.next())
	}
	c, err := newChanger("/live/", nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{} // key → value etcd would hold
	for i, v := range c.values {
		held["/live/"+nodes[i].Id] = string(v)
	}
	same, flips := 0, 0
	for k := range 1000 {
		i := k % len(nodes)
		op, err := c.change(i)
		if err != nil {
			t.Fatal(err)
		}
		key, v := string(op.KeyBytes()), string(op.ValueBytes())
		if key != "/live/"+nodes[i].Id {
			t.Fatalf("put to %q, want the record's key %q", key, "/live/"+nodes[i].Id)
		}
		before, err := curator.DecodeRecord(nodes[i].Id, []byte(held[key]))
		if err != nil {
			t.Fatal(err)
		}
		after, err := curator.DecodeRecord(nodes[i].Id, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(len(v)-600)) / 600; d > sizeSlack {
			t.Fatalf("changed record of %d bytes", len(v))
		}
		if v == held[key] {
			same++
		}
		if before.State != after.State {
			flips++
		}
		held[key] = v
	}
	if same < 100 || same > 200 || flips < 150 || flips > 250 {
		t.Errorf("%d of 1000 changes put the same bytes (want ~15%%), %d flipped the state (want ~20%%)", same, flips)
	}
}

// TestParseShapes: -shapes takes names in any order and case, once each,
// and refuses others.
func TestParseShapes(t *testing.T) {
	got, err := parseShapes("4K, 600,sim,600")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.name+"="+s.label())
	}
	if want := "sim=sim records 600=600 B records 4k=4 KiB records"; strings.Join(names, " ") != want {
		t.Errorf("parseShapes = %q, want %q", strings.Join(names, " "), want)
	}
	if _, err := parseShapes("600,1k"); err == nil {
		t.Error("parseShapes accepted 1k")
	}
}
