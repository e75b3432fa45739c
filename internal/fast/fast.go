// Package fast lists every fast path of nodewatch, each with its switch
// and the reference it is held to, in one place (as grpc-go's
// internal/envconfig lists its risky paths).
//
// A fast path is code that replaces a library or a plain way of doing
// something, to be faster or smaller, and must give the same output. Each
// one sits beside its reference, is checked against it by model or fuzz
// tests, and can be turned off: NODEWATCH_FAST=off in the environment
// turns every one off at once, NODEWATCH_FAST_OFF=NAME,NAME turns off the
// ones named. Then the reference runs instead, and nodewatch prints the
// same bytes (TestFastOffIdentical). A user who meets a wrong answer, or a
// developer who wants to know whether a bug is in a fast path, has a
// switch; make test runs the CLI suite and the model tests with every
// path off as well.
//
// The switches are read from the environment once, when the process
// starts, and never change after: like grpc-go's envconfig, they are the
// one package-level state nodewatch has, and it is read-only.
package fast

import (
	"os"
	"strings"

	"github.com/nodewatch/nodewatch/internal/enum"
)

// Path names one fast path.
type Path int

// The fast paths. Each line: what it replaces; the reference that runs
// when it is off; the tests that hold it to that reference.
const (
	// EtcdWire: etcd's Watch and Range responses decoded in place, keys
	// and values pointing into one reused buffer (internal/etcdwire).
	// Reference: etcd's generated code (etcdserverpb). Tests: etcdwire's
	// model tests and FuzzWatchCodec, FuzzRangeCodec.
	EtcdWire Path = iota
	// JQ: common jq filters answered from a document's JSON bytes without
	// decoding it (internal/jq/fast.go). Reference: gojq. Tests:
	// TestFastModel, FuzzFast.
	JQ
	// RawIO: etcd and Curator connections read, and a piped stdout
	// written, with raw read(2)/write(2) that do not wake the Go runtime's
	// monitor thread (internal/quietio; Linux only). Reference: net.Conn
	// and os.File. Tests: quietio's TestConnErrors and writer tests.
	RawIO
	// Pipe: a piped stdout reopened as nodewatch's own non-blocking file
	// and grown to 256 KiB (internal/console/output_linux.go; Linux only).
	// Reference: stdout as it is. Tests: TestOutputPipe, TestOutputGrowsPipe.
	Pipe
	// Pool: documents' memory made into other documents once the last
	// holder freed them (jsondoc.Free, Give, Share). Reference: the garbage
	// collector (Free does nothing). Tests: the poison builds (race, and
	// the e2e binary's nodewatch_poison tag) overwrite what is freed.
	Pool
	// OneProc: watching commands run on one P (GOMAXPROCS=1) unless
	// GOMAXPROCS is set. Reference: every P.
	OneProc
	// NodeWire: a node's JSON written straight from its protobuf encoding
	// or struct (internal/curator nodewire.go, nodejson.go). Reference:
	// proto.Unmarshal and protojson. Tests: TestNodeJSONModel,
	// FuzzNodeJSON, FuzzObjectOfWire.
	NodeWire

	nPaths
)

// names are the names NODEWATCH_FAST_OFF takes, by Path.
var names = enum.Names[Path]{
	EtcdWire: "etcdwire",
	JQ:       "jq",
	RawIO:    "rawio",
	Pipe:     "pipe",
	Pool:     "pool",
	OneProc:  "oneproc",
	NodeWire: "nodewire",
}

// String returns the name of p, as NODEWATCH_FAST_OFF takes it.
func (p Path) String() string { return names.String(p) }

// Paths returns every fast path.
func Paths() []Path { return names.Values() }

// off holds the switches, read once from the environment.
var off = Parse(os.Getenv("NODEWATCH_FAST"), os.Getenv("NODEWATCH_FAST_OFF"))

// On reports whether fast path p is on in this process.
func On(p Path) bool { return !off[p] }

// Switches says, by Path, which fast paths are off.
type Switches [nPaths]bool

// Parse reads the two variables: all ("off" turns every path off;
// anything else, or nothing, leaves them on) and some (a comma-separated
// list of names to turn off; unknown names are ignored, so that an older
// nodewatch runs with a newer list).
func Parse(all, some string) Switches {
	var s Switches
	if strings.EqualFold(strings.TrimSpace(all), "off") {
		for i := range s {
			s[i] = true
		}
		return s
	}
	for _, name := range strings.Split(some, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		for p, n := range names {
			if n == name {
				s[p] = true
			}
		}
	}
	return s
}
