package webhook

import (
	"testing"

	"kubegate/internal/testenv"
)

// TestMain shares one control plane among the integration tests; it also
// checks for leaked goroutines.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}
