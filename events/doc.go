// Package events is Joiner's inbound contract: the EventBridge events its Lambda
// functions accept, decoded into typed values, and the event patterns the CDK stack
// installs to deliver them.
//
// Every input goes through [Decode], which dispatches on (source, detail-type):
//
//	aws.ec2          EC2 Spot Instance Interruption Warning   -> *SpotInterruption
//	aws.ec2          EC2 Instance Rebalance Recommendation    -> *RebalanceRecommendation
//	aws.ec2          EC2 Instance State-change Notification   -> *StateChange
//	aws.health       AWS Health Event (EC2 scheduledChange)   -> *HealthScheduledChange
//	aws.events       Scheduled Event (classic rule)           -> *ScheduledRule
//	aws.scheduler    Scheduled Event (EventBridge Scheduler)  -> *SchedulerTick
//	joiner.forwarder Pending Pods                             -> *PendingPods
//
// Anything else that is a well-formed event comes back as *Ignored with a reason, so a
// handler can log it and do nothing; malformed input is an error naming the problem.
// The patterns (see patterns.go) and [Pattern.Matches] implement the subset of
// EventBridge's matching semantics the stack relies on, so a test can prove that each
// rule receives exactly the events its function decodes.
//
// One sample envelope per trigger lives next to this file (*.json) for
// `sam local invoke -e events/<sample>.json`; the tests round-trip every one.
package events
