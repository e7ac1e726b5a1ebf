# shell: the host harness types commands on the console (QEMU's stdio serial). Each command the harness
# sends ends with "echo PDEND-<n>=$?", so it knows when it finished and how; "exit" powers off.
echo "GUEST-SHELL"
sh
