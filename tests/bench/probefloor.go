package main

import (
	"bytes"
	"fmt"
	"net"
	"syscall"
	"time"
)

// benchProbeFloor says where the floor of an httpGet probe goes (the
// probeFloor of probes and probes-kubelet): n operations a second from one
// process doing nothing else, each kind for window, in two passes, with the
// CPU each costs. Every kind includes the wake-up of the loop's ticker,
// measured alone as "tick". An operation that fails is an error.
func benchProbeFloor(n int, window time.Duration) error {
	addr, stop, err := startFloorHTTPD()
	if err != nil {
		return err
	}
	defer stop()
	tcp, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return err
	}
	sa := &syscall.SockaddrInet4{Port: tcp.Port, Addr: [4]byte{127, 0, 0, 1}}
	request := []byte(fmt.Sprintf("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr))
	// rawConnect connects a blocking socket by system calls alone, outside
	// Go's network poller.
	rawConnect := func() (int, error) {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err := syscall.Connect(fd, sa); err != nil {
			syscall.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	var answer [4096]byte
	kinds := []struct {
		name, what string
		op         func() error
	}{
		{"tick", "the ticker's wake-up, nothing else", func() error { return nil }},
		{"raw connect", "a blocking socket's connect and close, by system calls", func() error {
			fd, err := rawConnect()
			if err != nil {
				return err
			}
			return syscall.Close(fd)
		}},
		{"net.Dial", "net.Dial and Close", func() error {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"raw GET", "connect, write the request, read to EOF, close, by system calls", func() error {
			fd, err := rawConnect()
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			if k, err := syscall.Write(fd, request); err != nil || k != len(request) {
				return fmt.Errorf("write: %d of %d bytes: %v", k, len(request), err)
			}
			got := 0
			for {
				k, err := syscall.Read(fd, answer[got:])
				if err == syscall.EINTR {
					continue
				}
				if err != nil {
					return err
				}
				if k == 0 {
					break
				}
				if got += k; got == len(answer) {
					return fmt.Errorf("answer longer than %d bytes", len(answer))
				}
			}
			status, _, _ := bytes.Cut(answer[:got], []byte("\r\n"))
			if !bytes.HasPrefix(status, []byte("HTTP/1.")) || !bytes.Contains(status, []byte(" 200 ")) || !bytes.HasSuffix(answer[:got], []byte(floorBody)) {
				return fmt.Errorf("answer %q", answer[:min(got, 200)])
			}
			return nil
		}},
		{"GET", "net.Dial, the request, http.ReadResponse, the body, Close (probeFloor's)", func() error { return floorGET(addr) }},
	}
	usage := func() (user, sys time.Duration) {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
	}
	type cost struct{ user, sys []float64 }
	costs := make([]cost, len(kinds))
	for range 2 {
		for i, k := range kinds {
			tick := time.NewTicker(time.Second / time.Duration(n))
			u0, s0 := usage()
			ops := 0
			for end := time.Now().Add(window); time.Now().Before(end); ops++ {
				<-tick.C
				if err := k.op(); err != nil {
					tick.Stop()
					return fmt.Errorf("probe-floor: %s: %v", k.name, err)
				}
			}
			u1, s1 := usage()
			tick.Stop()
			costs[i].user = append(costs[i].user, float64(u1-u0)/float64(ops)/1e3)
			costs[i].sys = append(costs[i].sys, float64(s1-s0)/float64(ops)/1e3)
		}
	}
	fmt.Printf("\nthe floor of an httpGet probe: %d operations a second from one process doing nothing else, %s of each kind, two passes (µs of CPU per operation, each pass; user and system as the kernel samples them, at its ticks; loadavg %s)\n\n", n, window, loadavg())
	fmt.Printf("| kind | what | user | system | total |\n|---|---|---|---|---|\n")
	for i, k := range kinds {
		c := costs[i]
		fmt.Printf("| %s | %s | %.0f, %.0f | %.0f, %.0f | %.0f, %.0f |\n", k.name, k.what,
			c.user[0], c.user[1], c.sys[0], c.sys[1], c.user[0]+c.sys[0], c.user[1]+c.sys[1])
	}
	return nil
}
