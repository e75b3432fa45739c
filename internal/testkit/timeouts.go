package testkit

import "time"

// The two named waits of the tests, as in grpc-go's test/timeouts.go.
const (
	// Timeout is how long a test waits for something that should happen
	// before it fails. It is generous, for machines loaded by other jobs
	// (make test-under-load: a race-detector build beside the tests, where
	// etcd's bcrypt for a user took seconds): a wait that ends as soon as
	// the thing happens costs nothing when it does.
	Timeout = 30 * time.Second

	// Quiet is how long a test watches for something that must not happen
	// (an output line, an event) before it takes it that it does not. It is
	// short: every such check costs all of it.
	Quiet = 300 * time.Millisecond
)
