//go:build linux

package sandbox

import (
	"os"
	"testing"
)

// The test binary is its own sandbox helper (/proc/self/exe).
func TestMain(m *testing.M) {
	MaybeHelper()
	code := m.Run()
	removeHostile()
	os.Exit(code)
}
