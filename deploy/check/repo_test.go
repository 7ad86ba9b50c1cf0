package check

import "path/filepath"

// repoPath is a path in the repository, given from its root; tests run in
// deploy/check.
func repoPath(p string) string { return filepath.Join("..", "..", filepath.FromSlash(p)) }
