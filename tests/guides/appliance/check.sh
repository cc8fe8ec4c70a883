#!/bin/sh
# Runs as root inside the booted appliance once systemd has booted; boot.sh
# passes its exit status on. Its output is share/result-1.log.
running() { staticpodd ps | grep -q -E "^default +$1 +1/1 +Running "; }
for i in $(seq 120); do
	running web-edge1 && running clock-edge1 && break
	sleep 1
done
staticpodd ps
staticpodd images ls
running web-edge1 && running clock-edge1
