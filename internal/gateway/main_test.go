package gateway_test

import (
	"testing"

	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

// Static users of the pass-through tests (passthrough_test.go): the
// writer is granted edit in each test's namespace, nobody nothing.
const (
	ptWriter = "pt-writer"
	ptNobody = "pt-nobody"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: ptWriter}, {Name: ptNobody}}})
}
