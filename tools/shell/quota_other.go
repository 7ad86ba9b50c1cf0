//go:build !linux

package shell

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// Off Linux there is no sandbox to run commands in; these keep the
// package building, and measure by a plain walk.

var errNoStatfs = errors.New("no statfs sampling on this system")

func statFS(string) (fsUse, error) { return fsUse{}, errNoStatfs }

func statFSUp(string) (fsUse, string, error) { return fsUse{}, "", errNoStatfs }

func landlockABI() int { return 0 }

func walkTree(dir string, stop Usage) (Usage, error) {
	var u Usage
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if u.over(stop) {
			return filepath.SkipAll
		}
		if fi, err := d.Info(); err == nil {
			u.Bytes += fi.Size()
		}
		if p != dir {
			u.Files++
		}
		return nil
	})
	return u, err
}
