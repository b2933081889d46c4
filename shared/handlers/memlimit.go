package handlers

import (
	"runtime/debug"
	"strconv"
)

// memoryLimitShare is the share of the function's memory the Go heap is kept
// within (debug.SetMemoryLimit): the rest holds the binary, goroutine stacks and
// the runtime's own structures. Without a limit the garbage collector lets the
// heap grow to twice what is live (GOGC=100), so a snapshot of 100,000 pods that
// needs 500 MB live could take a 1,024 MB function past its size and kill it; with
// the limit it collects harder instead, spending CPU (billed by the same
// GB-seconds) rather than failing.
const memoryLimitShare = 0.85

// MemoryLimit is the soft memory limit for a function given
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE (MB), or 0 when none applies: outside Lambda,
// with a malformed size, or when GOMEMLIMIT already sets one.
func MemoryLimit(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	mb, err := strconv.Atoi(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	if err != nil || mb <= 0 {
		return 0
	}
	return int64(float64(mb) * memoryLimitShare * (1 << 20))
}

// limitMemory applies MemoryLimit, once per container.
func limitMemory(getenv func(string) string) {
	if l := MemoryLimit(getenv); l > 0 {
		debug.SetMemoryLimit(l)
	}
}
