package view

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is
// still running when they are done.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
