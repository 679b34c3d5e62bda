#!/bin/sh
# Runs inside the freshly bootstrapped Debian root (chroot) that becomes the lab node image.
# It turns a minbase system into a host that behaves like a fleet machine: systemd as PID 1,
# an SSH daemon with per-container host keys, an admin user with sudo, and a developer user.
set -eu

# Admin account that Ansible uses over SSH (passwordless sudo, as on cloud GPU images).
useradd --create-home --shell /bin/bash --groups sudo fleet
printf 'fleet ALL=(ALL) NOPASSWD:ALL\n' > /etc/sudoers.d/fleet
chmod 0440 /etc/sudoers.d/fleet
# A developer account without sudo, for the laptop role.
useradd --create-home --shell /bin/bash dev
for user in fleet dev; do
  install -d -m 0700 -o "$user" -g "$user" "/home/$user/.ssh"
done

# SSH: keys only; host keys are generated per container on first boot, never baked in.
rm -f /etc/ssh/ssh_host_*
cat > /etc/ssh/sshd_config.d/lab.conf <<'CONF'
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
CONF
cat > /etc/systemd/system/ssh-hostkeys.service <<'UNIT'
[Unit]
Description=Generate SSH host keys for this lab node
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
ln -s /etc/systemd/system/ssh-hostkeys.service /etc/systemd/system/multi-user.target.wants/ssh-hostkeys.service

# Units that make no sense in a container and would leave systemd "degraded".
for unit in getty@tty1.service console-getty.service systemd-udevd.service \
    systemd-udev-trigger.service systemd-remount-fs.service sys-kernel-debug.mount \
    sys-kernel-tracing.mount dev-hugepages.mount systemd-modules-load.service \
    systemd-sysctl.service systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done

# Fresh machine-id per container.
: > /etc/machine-id
apt-get clean
rm -rf /var/cache/apt/*.bin
# The package lists from the bootstrap stay (as on a cloud image) but are marked as old, so a role's
# `cache_valid_time` refreshes them.
mkdir -p /var/lib/apt/lists/partial
touch -d @0 /var/lib/apt/lists
