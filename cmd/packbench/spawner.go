package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Linux charges a child started by fork+exec with its parent's resident-set high
// water mark (exec records the old mm's peak in the process's maxrss), so a joiner
// started from packbench — which by then holds 20,000-pod snapshots — would report
// packbench's RSS, not its own. packbench therefore starts a copy of itself as a
// spawner before it allocates anything; the spawner starts every timed `joiner
// plan` and reports wall time and getrusage max RSS, which then carry at most the
// spawner's few MiB.

const spawnerFlag = "-internal-spawner"

type spawnRequest struct {
	Argv []string `json:"argv"`
}

type spawnResult struct {
	WallNs    int64 `json:"wallNs"`
	MaxRSSKiB int64 `json:"maxRSSKiB"`
	// CPUNs is the process's user + system time: on a busy machine a better
	// measure of its work than the wall time.
	CPUNs int64  `json:"cpuNs"`
	Err   string `json:"err,omitempty"`
}

// spawner serves one request per input line: run argv with stdout to /dev/null.
func spawner(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req spawnRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil || len(req.Argv) == 0 {
			_ = enc.Encode(spawnResult{Err: fmt.Sprintf("bad request: %v", err)})
			continue
		}
		_ = enc.Encode(spawnOnce(req.Argv))
	}
	return 0
}

func spawnOnce(argv []string) spawnResult {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return spawnResult{Err: err.Error()}
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = devnull
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	res := spawnResult{WallNs: int64(time.Since(start))}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSSKiB = ru.Maxrss // KiB on Linux
		res.CPUNs = ru.Utime.Nano() + ru.Stime.Nano()
	}
	if err != nil {
		res.Err = fmt.Sprintf("%v: %s", err, firstLine(stderr.String()))
	}
	return res
}

type spawnerClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startSpawner() (*spawnerClient, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, spawnerFlag)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &spawnerClient{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (s *spawnerClient) run(argv []string) (spawnResult, error) {
	req, err := json.Marshal(spawnRequest{Argv: argv})
	if err != nil {
		return spawnResult{}, err
	}
	if _, err := s.in.Write(append(req, '\n')); err != nil {
		return spawnResult{}, err
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		return spawnResult{}, err
	}
	var res spawnResult
	if err := json.Unmarshal(line, &res); err != nil {
		return spawnResult{}, err
	}
	if res.Err != "" {
		return res, errors.New(strings.TrimSpace(res.Err))
	}
	return res, nil
}

func (s *spawnerClient) close() {
	s.in.Close()
	_ = s.cmd.Wait()
}
