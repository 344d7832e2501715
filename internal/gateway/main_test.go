package gateway_test

import (
	"testing"

	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
