package gateway_test

import (
	"testing"

	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

// Static users of the pass-through tests (passthrough_test.go): the
// writer is granted edit in each test's namespace, nobody nothing. The
// conformance test's user (kubectl_conformance_test.go) reads every
// resource cluster-wide and edits in its namespace.
const (
	ptWriter = "pt-writer"
	ptNobody = "pt-nobody"
	kcUser   = "kc-user"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: ptWriter}, {Name: ptNobody}, {Name: kcUser}}})
}
