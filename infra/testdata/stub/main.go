// Command stub stands in for a function's bootstrap in the stack tests when `make
// functions` has not been run: Code.fromAsset needs a real file to stage. It is never
// deployed: the tests synthesize into temporary folders, and the app itself refuses to
// synthesize without the real dist/<function>/bootstrap.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "joiner: test stand-in bootstrap (infra/testdata/stub), not a Joiner function")
	os.Exit(1)
}
