// Package testkit is test scaffolding, for tests only: what the tests of
// every package share. Timeout and Quiet say how long a test waits for what
// should happen and watches for what must not; Poll and Eventually wait for
// an observable state instead of for a time, and Receive for what a
// goroutine returns; Buffer collects what a process or a goroutine writes
// while the test reads it. The packages below it (etcdtest, curatortest,
// faults, …) build on these.
package testkit
