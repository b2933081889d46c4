package cloud

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

// EC2 error codes the provider acts on.
const (
	CodeDryRunOperation       = "DryRunOperation"
	CodeUnauthorizedOperation = "UnauthorizedOperation"
	// CodeNotChecked marks a dry-run answer Joiner made up for a service
	// without a dry run (IAM): the call was not sent.
	CodeNotChecked       = "NotChecked"
	codeLTNameNotFound   = "InvalidLaunchTemplateName.NotFoundException"
	codeLTNameExists     = "InvalidLaunchTemplateName.AlreadyExistsException"
	codeInstanceNotFound = "InvalidInstanceID.NotFound"
	codeFreeAddresses    = "InsufficientFreeAddressesInSubnet"
	codeSpotSLR          = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
)

// unfulfillableCapacityCodes are the CreateFleet error codes Karpenter's AWS
// provider (pkg/errors) treats as "this offering cannot be had right now".
// InsufficientFreeAddressesInSubnet is on Karpenter's list too, but it is the
// subnet that is short, not the offering: it marks the subnet (see
// UnavailableOfferings.MarkSubnetUnavailable), as Karpenter does.
var unfulfillableCapacityCodes = map[string]bool{
	"InsufficientInstanceCapacity": true,
	"MaxSpotInstanceCountExceeded": true,
	"VcpuLimitExceeded":            true,
	"UnfulfillableCapacity":        true,
	"Unsupported":                  true,
	"ReservationCapacityExceeded":  true,
}

// IsUnfulfillableCapacity reports whether a CreateFleet error code means the
// offering is temporarily unavailable.
func IsUnfulfillableCapacity(code string) bool { return unfulfillableCapacityCodes[code] }

// permissionCodes mean the caller lacks a permission. EC2 answers
// UnauthorizedOperation; AccessDenied comes from other services and from
// emulators that enforce IAM.
var permissionCodes = map[string]bool{
	CodeUnauthorizedOperation: true,
	"AccessDenied":            true,
	"AccessDeniedException":   true,
	"AuthFailure":             true,
}

// ErrorCode returns the AWS error code of err, or "".
func ErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// DryRunResult is the answer to one mutating call sent with DryRun=true.
type DryRunResult struct {
	// Operation is the EC2 action, e.g. "CreateFleet".
	Operation string `json:"operation"`
	// Target names what the call was about (launch template, NodeClaim, instances).
	Target string `json:"target,omitempty"`
	// Allowed is true when EC2 answered DryRunOperation.
	Allowed bool `json:"allowed"`
	// PermissionMissing is true when EC2 answered UnauthorizedOperation (or AccessDenied).
	PermissionMissing bool `json:"permissionMissing,omitempty"`
	// Code and Message are EC2's answer, verbatim.
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (r DryRunResult) String() string {
	switch {
	case r.Allowed:
		return fmt.Sprintf("%s %s: would succeed", r.Operation, r.Target)
	case r.PermissionMissing:
		return fmt.Sprintf("%s %s: permission missing (%s)", r.Operation, r.Target, r.Code)
	case r.Code == CodeNotChecked:
		return fmt.Sprintf("%s %s: not sent, permission not checked (%s)", r.Operation, r.Target, r.Message)
	}
	return fmt.Sprintf("%s %s: failed before the permission check (%s: %s)", r.Operation, r.Target, r.Code, r.Message)
}

// dryRunOutcome classifies the error of a DryRun call. ok is false when err
// is not a dry-run answer at all (nil, or a transport error).
func dryRunOutcome(op, target string, err error) (DryRunResult, bool) {
	if err == nil {
		// A DryRun call never succeeds: an endpoint that ignored the flag did the work.
		return DryRunResult{Operation: op, Target: target, Code: "NoDryRunAnswer", Message: "the endpoint performed the call instead of answering DryRunOperation"}, true
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return DryRunResult{}, false
	}
	r := DryRunResult{Operation: op, Target: target, Code: apiErr.ErrorCode(), Message: apiErr.ErrorMessage()}
	switch {
	case r.Code == CodeDryRunOperation:
		r.Allowed = true
	case permissionCodes[r.Code] || strings.HasPrefix(r.Code, "UnauthorizedOperation"):
		r.PermissionMissing = true
	}
	return r, true
}

// ErrInsufficientCapacity is returned (wrapped) when every allowed offering
// of a launch was unavailable.
var ErrInsufficientCapacity = errors.New("insufficient capacity")

// ForeignInstanceError refuses an operation on an instance Joiner did not launch.
type ForeignInstanceError struct {
	InstanceID string
	Reason     string
}

func (e *ForeignInstanceError) Error() string {
	return fmt.Sprintf("refusing to touch instance %s: %s", e.InstanceID, e.Reason)
}
