package events

// The patterns the CDK stack installs (infra/ renders these same values; its tests
// compare the synthesized rules with them).

// InterruptionEC2Pattern selects the aws.ec2 events the interruption function handles,
// on the account's default bus.
func InterruptionEC2Pattern() Pattern {
	return Pattern{
		"source":      Strings(SourceEC2),
		"detail-type": Strings(DetailTypeSpotInterruption, DetailTypeRebalance, DetailTypeStateChange),
	}
}

// InterruptionHealthPattern selects AWS Health scheduled changes for EC2, on the
// default bus. It is a separate rule from the EC2 one because Health events arrive days
// ahead and deserve a longer retry window than a two-minute spot warning.
func InterruptionHealthPattern() Pattern {
	return Pattern{
		"source":      Strings(SourceHealth),
		"detail-type": Strings(DetailTypeHealth),
		"detail": Pattern{
			"service":           Strings(HealthServiceEC2),
			"eventTypeCategory": Strings(HealthCategoryScheduledChange),
		},
	}
}

// PendingPodsPattern selects the forwarder's events on Joiner's own bus.
func PendingPodsPattern() Pattern {
	return Pattern{
		"source":      Strings(SourceForwarder),
		"detail-type": Strings(DetailTypePendingPods),
	}
}
