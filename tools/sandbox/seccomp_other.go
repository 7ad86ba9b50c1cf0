//go:build linux && !amd64 && !arm64

package sandbox

import (
	"fmt"
	"runtime"
)

// installSeccomp refuses on architectures the filter was not written
// for: without it the probe fails and the shell is not offered.
func installSeccomp() error {
	return fmt.Errorf("seccomp: no filter for %s; the sandbox supports amd64 and arm64", runtime.GOARCH)
}
