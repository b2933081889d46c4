// Command infra is Joiner's CDK app: `npx cdk synth` / `npx cdk deploy` from the
// repository root, where cdk.json runs infra/cdk-app.sh (builds the function binaries,
// then `go run` here). Configuration comes from context (-c key=value): see config.go for
// the keys and infra/README.md for deployments.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	app := awscdk.NewApp(nil)
	cfg, err := ConfigFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err == nil {
		_, err = NewStack(app, cfg, nil)
	}
	if err != nil {
		jsii.Close()
		fmt.Fprintf(os.Stderr, "joiner infra: %v\n", err)
		os.Exit(1)
	}
	// cdk-nag runs on every synth: an unsuppressed AwsSolutions finding is an error
	// annotation, which fails `cdk synth` and `cdk deploy`.
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
	jsii.Close()
}
