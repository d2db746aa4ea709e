# The same allreduce with mpi4py (Debian's python3-mpi4py, run by /usr/bin/python3).
from mpi4py import MPI
import socket
import sys

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
comm.Barrier()
expected = size * (size + 1) // 2
# One write per line: print() writes the text and the newline separately, and mpirun may put
# another rank's line between the two.
line = (f"rank {rank} of {size} on {socket.gethostname()}: allreduce sum {total} "
        f"(expected {expected}) {'OK' if total == expected else 'WRONG'}\n")
sys.stdout.write(line)
sys.stdout.flush()
raise SystemExit(0 if total == expected else 1)
