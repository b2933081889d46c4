// Command joiner-run holds the joiner commands that link the Lambda handlers, the
// AWS SDK and client-go: replay, invoke, record and sim. Users type `joiner
// replay …`; joiner starts this program (see cmd/internal/cli). It can also be
// run directly, with the same arguments.
package main

import "github.com/joiner-autoscaler/joiner/cmd/internal/cli"

var commands = cli.NewSet("joiner")

// register adds a subcommand from its file's init.
func register(c cli.Command) { commands.Register(c) }

func main() { commands.Main() }

// dispatch is what tests call.
var dispatch = commands.Dispatch
