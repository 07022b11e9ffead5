#!/bin/sh
# A job over several hosts on this one machine: mpirun's launch agent in place
# of ssh (spec/distributed/two_hosts_spec.lua; README, "Many processes").
# Every many-process spec otherwise runs on one host, where dlrun copies each
# piece between processes straight out of the sender's memory; between hosts
# it must send MPI messages. With
#   mpirun --host host-a:2,host-b:2 --mca plm_rsh_agent scripts/two-hosts-agent.sh ...
# Open MPI starts one daemon (orted) per host name through this script, as
#   two-hosts-agent.sh HOST COMMAND...
# and it runs COMMAND as ssh would (one shell line) in a UTS namespace of its
# own whose host name is HOST. Open MPI then sees one node per name: MPI's
# shared-memory communicator (dlrun's host) splits by name, and processes of
# different names talk over TCP (--mca btl self,vader,tcp). Nothing else is
# apart (the same kernel, process ids, /proc and memory): what keeps pieces
# between the hosts off the one-copy path is dlrun's host alone.
# Needs unshare (util-linux) and the right to make a UTS namespace (root).
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 HOST COMMAND..." >&2
  exit 2
fi
host=$1
shift
# shellcheck disable=SC2016 # expanded by the inner shell, in the namespace
exec unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
