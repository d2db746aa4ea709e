# The same allreduce with mpi4py (Debian's python3-mpi4py, run by /usr/bin/python3).
from mpi4py import MPI
import socket

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
comm.Barrier()
expected = size * (size + 1) // 2
print(f"rank {rank} of {size} on {socket.gethostname()}: allreduce sum {total} "
      f"(expected {expected}) {'OK' if total == expected else 'WRONG'}", flush=True)
raise SystemExit(0 if total == expected else 1)
