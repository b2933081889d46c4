// Command provisioner is Joiner's provisioner Lambda function. The handler lives in
// shared/handlers; this main only wires it to the Lambda runtime, and names only
// its own handler, so the binary links neither of the other two.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
)

func main() {
	fn, err := handlers.FromEnvFor(context.Background(), handlers.ProvisionerHandler())
	if err != nil {
		// Lambda reports the init error with this message on every invocation.
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
	lambda.Start(fn)
}
