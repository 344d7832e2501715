package feed

import (
	"testing"

	"kubegate/internal/testenv"
)

// TestMain runs the tests against a real control plane and checks, once
// it has stopped, that no goroutine leaked.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}
