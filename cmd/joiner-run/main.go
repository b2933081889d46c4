// Command joiner-run holds the joiner commands that link the Lambda handlers, the
// AWS SDK and client-go: replay, invoke, record, shadow, sim and cleanup. Users type `joiner
// replay …`; joiner starts this program (see cmd/internal/cli). It can also be
// run directly, with the same arguments.
package main

import (
	"fmt"
	"io"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
)

var commands = cli.NewSet("joiner")

// register adds a subcommand from its file's init.
func register(c cli.Command) { commands.Register(c) }

func main() { commands.Main() }

// dispatch is what tests call.
var dispatch = commands.Dispatch

// subcommand checks that args start with the one subcommand a command has (sim
// serve, shadow report): ok with the rest of the arguments, else the exit code
// after printing usage (0 for help, 2 for anything else).
func subcommand(args []string, name, usage string, stderr io.Writer) (rest []string, code int, ok bool) {
	if len(args) > 0 && args[0] == name {
		return args[1:], 0, true
	}
	fmt.Fprintln(stderr, usage)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return nil, 0, false
	}
	return nil, 2, false
}
