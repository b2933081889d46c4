package awssim

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// EC2's checks of what a launch asks for, beyond capacity. A simulator more
// lenient than EC2 lets a launch pass here that fails in a real account, so
// every parameter Joiner sends is checked as EC2 checks it. Where the answer
// is per launch option (an override of a fleet), CreateFleet reports it in
// the fleet's Errors for that override; RunInstances refuses the call.

// launchInput is what a launch specifies besides its pools' instance type,
// subnet and image.
type launchInput struct {
	profile  string
	userData string
	sgIDs    []string
	bdms     []BlockDeviceMapping
	tags     map[string]string // the instance's own tags (aws: tags excluded)
}

// maxTagsPerResource is EC2's limit of user tags on one resource.
const maxTagsPerResource = 50

// errTagLimit is EC2's refusal of a resource with more than
// maxTagsPerResource tags, wherever the tags come from (a launch's
// TagSpecifications, its launch template's, CreateTags). The wording is the
// code's description in the EC2 API Reference ("Error codes for the Amazon EC2
// API": TagLimitExceeded, "You've reached the limit on the number of tags that
// you can assign to the specified resource."); EC2 publishes no other message.
func errTagLimit() *apiError {
	return &apiError{http.StatusBadRequest, "TagLimitExceeded",
		"You've reached the limit on the number of tags that you can assign to the specified resource."}
}

// checkPool returns EC2's error for launching from a pool with in ("" when
// nothing is wrong). The order follows what EC2 reports first for a launch
// with several faults: the image, then the profile, networks and volumes.
func (s *Sim) checkPool(pl *pool, in launchInput) (code, msg string) {
	if code, msg = s.checkImage(pl.imageID, pl.instanceType); code != "" {
		return code, msg
	}
	if code, msg = s.checkInstanceProfile(in.profile); code != "" {
		return code, msg
	}
	if code, msg = s.checkNetworks(in.sgIDs, pl.subnet); code != "" {
		return code, msg
	}
	if e := checkUserData(in.userData); e != nil {
		return e.Code, e.Message
	}
	if code, msg = s.checkBlockDevices(pl.imageID, in.bdms); code != "" {
		return code, msg
	}
	if len(in.tags) > maxTagsPerResource {
		e := errTagLimit()
		return e.Code, e.Message
	}
	return "", ""
}

// checkNetworks refuses security groups of another VPC than the subnet's, which
// moto does not check. EC2 API Reference, "Error codes for the Amazon EC2 API":
// InvalidParameter, "A parameter specified in a request is not valid, is
// unsupported, or cannot be used. ... For example, if you are launching an
// instance, you can't specify a security group and subnet that are in
// different VPCs."; the message names both: "Security group sg-… and subnet
// subnet-… belong to different networks."
func (s *Sim) checkNetworks(sgIDs []string, subnet *Subnet) (code, msg string) {
	if subnet == nil {
		return "", ""
	}
	for _, id := range sgIDs {
		sg, ok := s.w.sgs.get(id)
		if !ok {
			return "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", id)
		}
		if sg.VpcID != subnet.VpcID {
			return "InvalidParameter", fmt.Sprintf("Security group %s and subnet %s belong to different networks.", id, subnet.ID)
		}
	}
	return "", ""
}

// deviceNameRE is the device names EC2 accepts in a block device mapping of a
// Linux instance (EC2 User Guide, "Device names for volumes"): /dev/sd[a-z],
// /dev/xvd[a-z] with an optional second letter or partition number, with or
// without the /dev/ prefix.
var deviceNameRE = regexp.MustCompile(`^(/dev/)?(sd|xvd)[a-z][a-z]?([1-9][0-9]?)?$`)

// checkBlockDevices checks the launch's volumes against its image: a device
// the image has may be enlarged but not shrunk below its snapshot, and a
// device it lacks is a new volume, which needs a size or a snapshot. EC2
// answers InvalidBlockDeviceMapping for each (EC2 API Reference, "Error codes":
// "The block device mapping ... is not valid").
func (s *Sim) checkBlockDevices(imageID string, bdms []BlockDeviceMapping) (code, msg string) {
	img, ok := s.w.images.get(imageID)
	if !ok {
		return "", "" // checkImage reports it
	}
	seen := map[string]bool{}
	for _, b := range bdms {
		if !deviceNameRE.MatchString(b.DeviceName) {
			return "InvalidBlockDeviceMapping", fmt.Sprintf("Invalid device name %s", b.DeviceName)
		}
		norm := "/dev/" + strings.TrimPrefix(b.DeviceName, "/dev/")
		if seen[norm] {
			return "InvalidBlockDeviceMapping", fmt.Sprintf("The device name %s is used more than once", b.DeviceName)
		}
		seen[norm] = true
		var snap *ImageBlockDevice
		for i := range img.BlockDevices {
			if "/dev/"+strings.TrimPrefix(img.BlockDevices[i].DeviceName, "/dev/") == norm {
				snap = &img.BlockDevices[i]
			}
		}
		switch {
		case snap == nil && b.VolumeSizeGiB == 0 && b.SnapshotID == "":
			return "InvalidBlockDeviceMapping", fmt.Sprintf("The device %s is not in the block device mapping of image %s (its devices: %s), so it is a new volume and needs a volume size or a snapshot", b.DeviceName, imageID, imageDevices(img))
		case snap != nil && b.VolumeSizeGiB > 0 && b.SnapshotID == "" && b.VolumeSizeGiB < snap.VolumeSizeGiB:
			return "InvalidBlockDeviceMapping", fmt.Sprintf("Volume of size %dGB is smaller than snapshot '%s', expect size >= %dGB", b.VolumeSizeGiB, snap.SnapshotID, snap.VolumeSizeGiB)
		}
	}
	return "", ""
}

func imageDevices(img *Image) string {
	var names []string
	for _, b := range img.BlockDevices {
		names = append(names, b.DeviceName)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// userTags counts the tags a user set on an instance (EC2's limit leaves out
// the aws: tags EC2 adds itself).
func userTags(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		if !strings.HasPrefix(k, "aws:") {
			out[k] = v
		}
	}
	return out
}
