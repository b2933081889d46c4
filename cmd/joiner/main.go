// Command joiner is Joiner's command-line tool: it validates Karpenter manifests,
// plans node launches offline and exports the instance catalog; replay, invoke,
// record and sim run in its companion program joiner-run (see cmd/internal/cli
// for why), which joiner starts for them.
package main

import "github.com/joiner-autoscaler/joiner/cmd/internal/cli"

var commands = cli.NewSet("joiner")

// register adds a subcommand; each lives in its own file and registers itself
// from init, so adding one never edits this file.
func register(c cli.Command) { commands.Register(c) }

func main() {
	commands.Forward()
	commands.Main()
}

// dispatch is what tests call: the commands this program holds.
var dispatch = commands.Dispatch
