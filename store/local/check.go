package local

import (
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Check opens the store at path read-only, to see that it is one, and
// closes it again. It changes nothing and creates nothing: a missing file
// is an error matching fs.ErrNotExist. If another process has the store
// open (a running firstmate), it fails with ErrInUse within about a second.
// doctor uses it.
func Check(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: lockWait})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("local store %s: %w (its lock is held)", path, ErrInUse)
	}
	if err != nil {
		return fmt.Errorf("local store %s: %w", path, err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSessions) == nil {
			return errors.New("not a firstmate store (it has no sessions)")
		}
		return nil
	})
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("local store %s: %w", path, err)
	}
	return nil
}
