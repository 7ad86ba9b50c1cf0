// Command firstmate-sandbox is the sandbox helper on its own: a smaller
// binary than firstmate, for measuring what re-executing firstmate itself
// costs. firstmate uses itself unless sandbox.helper names this binary.
package main

import (
	"fmt"
	"os"

	"github.com/firstmate/firstmate/tools/sandbox"
)

func main() {
	sandbox.MaybeHelper()
	fmt.Fprintln(os.Stderr, "firstmate-sandbox is started by firstmate to run one sandboxed command; it is not run by hand")
	os.Exit(2)
}
