package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// benchProbeFloor says where the floor of an httpGet probe goes (the
// probeFloor of probes and probes-kubelet): n operations a second from one
// process doing nothing else, each kind for window, in two passes, with the
// user and system time each costs. Every kind includes the wake-up of the
// loop's ticker, measured alone as "tick".
func benchProbeFloor(n int, window time.Duration) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-probefloor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("ok\n"), 0o644); err != nil {
		return err
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tcp := l.Addr().(*net.TCPAddr)
	addr := tcp.String()
	l.Close()
	httpd := exec.Command("busybox", "httpd", "-f", "-p", addr, "-h", dir)
	if err := httpd.Start(); err != nil {
		return fmt.Errorf("busybox httpd: %w", err)
	}
	defer func() { httpd.Process.Kill(); httpd.Wait() }()
	if err := poll(5*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
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
	kinds := []struct {
		name, what string
		op         func()
	}{
		{"tick", "the ticker's wake-up, nothing else", func() {}},
		{"raw connect", "a blocking socket's connect and close, by system calls", func() {
			if fd, err := rawConnect(); err == nil {
				syscall.Close(fd)
			}
		}},
		{"net.Dial", "net.Dial and Close", func() {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
			}
		}},
		{"raw GET", "connect, write the request, read to EOF, close, by system calls", func() {
			fd, err := rawConnect()
			if err != nil {
				return
			}
			defer syscall.Close(fd)
			syscall.Write(fd, request)
			var b [4096]byte
			for {
				if k, err := syscall.Read(fd, b[:]); k <= 0 || err != nil {
					return
				}
			}
		}},
		{"GET", "net.Dial, the request, http.ReadResponse, Close (probeFloor's)", func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			c.Write(request)
			if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				res.Body.Close()
			}
		}},
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
				k.op()
			}
			u1, s1 := usage()
			tick.Stop()
			costs[i].user = append(costs[i].user, float64(u1-u0)/float64(ops)/1e3)
			costs[i].sys = append(costs[i].sys, float64(s1-s0)/float64(ops)/1e3)
		}
	}
	fmt.Printf("\nthe floor of an httpGet probe: %d operations a second from one process doing nothing else, %s of each kind, two passes (µs of CPU per operation, each pass; loadavg %s)\n\n", n, window, loadavg())
	fmt.Printf("| kind | what | user | system | total |\n|---|---|---|---|---|\n")
	for i, k := range kinds {
		c := costs[i]
		fmt.Printf("| %s | %s | %.0f, %.0f | %.0f, %.0f | %.0f, %.0f |\n", k.name, k.what,
			c.user[0], c.user[1], c.sys[0], c.sys[1], c.user[0]+c.sys[0], c.user[1]+c.sys[1])
	}
	return nil
}
