//go:build ignore

// gen writes deploy/crds from the CRD files Karpenter publishes in its Go modules
// (see crds.go for the pinned versions): run `go generate ./deploy/crds`. It needs
// the go command and GOPROXY (or a module cache that has both modules).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/joiner-autoscaler/joiner/deploy/crds"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy/crds/gen:", err)
		os.Exit(1)
	}
}

func run() error {
	provider, core, err := crds.Published(true)
	if err != nil {
		return err
	}
	var all []crds.Source
	for _, name := range crds.CoreFiles {
		if err := crds.DerivedFrom(core[name].Data, provider[name].Data); err != nil {
			return fmt.Errorf("%s of %s@%s is not derived from %s@%s's: %v", name, crds.ProviderModule, crds.ProviderVersion, crds.CoreModule, crds.CoreVersion, err)
		}
		all = append(all, core[name])
	}
	for _, name := range crds.Files {
		s := provider[name]
		all = append(all, s)
		if err := os.WriteFile(name, append([]byte(crds.Header(s)), s.Data...), 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote deploy/crds/%s from %s@%s %s (%d bytes)\n", name, s.Module, s.Version, s.Path, len(s.Data))
	}
	if err := os.WriteFile(crds.SumsFile, []byte(crds.FormatSums(all...)), 0o644); err != nil {
		return err
	}
	dir, _ := os.Getwd()
	fmt.Printf("wrote %s\n", filepath.Join(filepath.Base(dir), crds.SumsFile))
	return nil
}
