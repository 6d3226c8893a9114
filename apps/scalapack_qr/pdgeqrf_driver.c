/*
 * pdgeqrf_driver: time ScaLAPACK's PDGEQRF (distributed QR factorisation) on a p x q BLACS grid.
 *
 * Usage: mpiexec -n NPROC pdgeqrf_driver M N MB NB P Q REPEATS [--check] [--corrupt] [--seed S]
 *        mpiexec -n NPROC pdgeqrf_driver --from-table M N REPEATS [--check] [--corrupt] [--seed S]
 *        pdgeqrf_driver --lookup M N
 *
 *   M, N     global matrix size (rows, columns)
 *   MB, NB   row and column block sizes of the 2D block-cyclic distribution
 *   P, Q     process grid (P * Q must equal the number of MPI ranks)
 *   REPEATS  number of timed factorisations (each of a fresh copy of the same matrix)
 *   --check  after the last factorisation, compute the backward error
 *            ||A - Q R||_F / (||A||_F * max(M, N) * eps) and report it as "residual"
 *            and sum_j log|R(j,j)| as "logabsdiag_r" (log|det A| for a square A)
 *   --corrupt  (self-test of the check) perturb one entry of R before checking; the residual
 *            must then be large
 *   --seed S seed of the matrix entries (default 1)
 *
 * Selection table (a driver compiled with -DPDGEQRF_SELECTION_TABLE='"table.h"', the C header of
 * `gptask export-table MODEL --grid ... --format c-header`): --from-table takes MB, NB, P and Q
 * (= NPROC / P) from the table's entry nearest to M x N; the run must have the entry's NPROC ranks
 * and its BLAS threads (OPENBLAS_NUM_THREADS = nth), which `--lookup M N` prints as one JSON line
 * (without MPI) for the job script: {"m": .., "n": .., "mb": .., "nb": .., "nproc": .., "p": ..,
 * "q": .., "nth": .., "status": "inside" | "fallback" | "outside", "predicted": seconds or null}.
 * A driver built without a table refuses both options.
 *
 * The matrix entries are a hash of (seed, global row, global column), uniform in [-0.5, 0.5), so
 * the matrix is the same whatever the grid and block sizes.
 *
 * Timing: MPI_Barrier, MPI_Wtime, PDGEQRF, MPI_Barrier, MPI_Wtime; the slowest rank's time is
 * kept. The workspace size is queried (LWORK = -1) and allocated before any timing.
 *
 * Output: one JSON line on rank 0's stdout, e.g.
 *   {"time": 0.12, "times": [0.13, 0.12], "m": 500, ..., "memory": 1052672, "residual": 0.004, ...}
 * "time" is the minimum over the repeats, in seconds.
 *
 * Memory: "memory" is the largest number of bytes any process allocates for the factorisation:
 * the local matrix twice (the original A and the copy factored, LLD x LOCc(N) doubles each, with
 * LOCr/LOCc from NUMROC), TAU (LOCc(N) + NB doubles), PDGEQRF's workspace (LWORK doubles, from its
 * workspace query: NB * (Mp0 + Nq0 + NB)) and the REPEATS timings, as this driver allocates
 * them. "memory_check" is what the residual check allocates on top (a third local matrix and
 * PDORMQR's workspace), 0 without --check. "local_rows", "local_cols", "lwork": rank 0's values.
 * With --check, "check_passed" says whether the residual is at most RESIDUAL_LIMIT (10; a correct
 * factorisation gives ~1e-2, a wrong one > 1e6). Errors: a JSON line {"error": "..."} on
 * stderr and exit status 2 (bad arguments) or 3 (ScaLAPACK returned INFO != 0 or out of memory).
 */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PDGEQRF_SELECTION_TABLE
#include PDGEQRF_SELECTION_TABLE
#endif

/* BLACS (C interface) and ScaLAPACK/PBLAS (Fortran interface) prototypes. */
void Cblacs_pinfo(int *mypnum, int *nprocs);
void Cblacs_get(int icontxt, int what, int *val);
void Cblacs_gridinit(int *icontxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int icontxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int icontxt);
void Cblacs_exit(int notdone);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
               const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdgeqrf_(const int *m, const int *n, double *a, const int *ia, const int *ja, const int *desca,
              double *tau, double *work, const int *lwork, int *info);
void pdormqr_(const char *side, const char *trans, const int *m, const int *n, const int *k,
              const double *a, const int *ia, const int *ja, const int *desca, const double *tau,
              double *c, const int *ic, const int *jc, const int *descc, double *work,
              const int *lwork, int *info);
void pdlaset_(const char *uplo, const int *m, const int *n, const double *alpha, const double *beta,
              double *a, const int *ia, const int *ja, const int *desca);
void pdgeadd_(const char *trans, const int *m, const int *n, const double *alpha, const double *a,
              const int *ia, const int *ja, const int *desca, const double *beta, double *c,
              const int *ic, const int *jc, const int *descc);
double pdlange_(const char *norm, const int *m, const int *n, const double *a, const int *ia,
                const int *ja, const int *desca, double *work);

/* largest backward error of a correct factorisation (apps/scalapack_qr/problem.py: RESIDUAL_LIMIT) */
#define RESIDUAL_LIMIT 10.0

static int g_rank = 0;

static void fail(int code, const char *msg, long value) {
    if (g_rank == 0) {
        fprintf(stderr, "{\"error\": \"%s\", \"value\": %ld}\n", msg, value);
        fflush(stderr);
    }
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static long parse_long(const char *s, const char *what) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0') fail(2, what, -1);
    return v;
}

/* splitmix64: a good 64-bit mix, so entries are independent of the distribution. */
static double entry(uint64_t seed, uint64_t i, uint64_t j) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i * 0xBF58476D1CE4E5B9ULL + j * 0x94D049BB133111EBULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z = z ^ (z >> 31);
    return (double)(z >> 11) * (1.0 / 9007199254740992.0) - 0.5;
}

/* Global index (0-based) of local index il on process coordinate iproc (source process 0). */
static long global_index(long il, long nb, long iproc, long nprocs) {
    return ((il / nb) * nprocs + iproc) * nb + il % nb;
}

#ifdef PDGEQRF_SELECTION_TABLE
static const char *table_status(int status) {
    return status == GPTASK_TABLE_INSIDE ? "inside" : (status == GPTASK_TABLE_FALLBACK ? "fallback" : "outside");
}

/* --lookup M N: the table's configuration for M x N as one JSON line, no MPI. */
static int lookup_main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "{\"error\": \"usage: pdgeqrf_driver --lookup M N\"}\n");
        return 2;
    }
    char *end1 = NULL, *end2 = NULL;
    long m = strtol(argv[2], &end1, 10), n = strtol(argv[3], &end2, 10);
    if (end1 == argv[2] || *end1 != '\0' || end2 == argv[3] || *end2 != '\0' || m < 1 || n < 1) {
        fprintf(stderr, "{\"error\": \"M and N must be integers >= 1\"}\n");
        return 2;
    }
    int status;
    const double task[2] = {(double)m, (double)n};
    const gptask_table_entry *e = gptask_table_lookup(task, &status);
    printf("{\"m\": %ld, \"n\": %ld, \"mb\": %d, \"nb\": %d, \"nproc\": %d, \"p\": %d, \"q\": %d, \"nth\": %d, "
           "\"status\": \"%s\", \"predicted\": ", m, n, e->mb, e->nb, e->nproc, e->p, e->nproc / e->p, e->nth,
           table_status(status));
    if (isnan(e->value)) printf("null}\n");
    else printf("%.6g}\n", e->value);
    return 0;
}
#endif

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--lookup") == 0) {
#ifdef PDGEQRF_SELECTION_TABLE
        return lookup_main(argc, argv);
#else
        fprintf(stderr, "{\"error\": \"this driver was built without a selection table (-DPDGEQRF_SELECTION_TABLE)\"}\n");
        return 2;
#endif
    }
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int m, n, mb, nb, p, q, repeats, first_option;
    const char *from_table = NULL; /* the entry's status when the configuration comes from the table */
    if (argc > 1 && strcmp(argv[1], "--from-table") == 0) {
#ifdef PDGEQRF_SELECTION_TABLE
        if (argc < 5) fail(2, "usage: pdgeqrf_driver --from-table M N REPEATS [--check] [--corrupt] [--seed S]", argc);
        m = (int)parse_long(argv[2], "M is not an integer");
        n = (int)parse_long(argv[3], "N is not an integer");
        repeats = (int)parse_long(argv[4], "REPEATS is not an integer");
        int status;
        const double task[2] = {(double)m, (double)n};
        const gptask_table_entry *e = gptask_table_lookup(task, &status);
        if (e->nproc != size) fail(2, "the table's configuration for this size needs this many MPI ranks (see --lookup)", e->nproc);
        mb = e->mb;
        nb = e->nb;
        p = e->p;
        q = e->nproc / e->p;
        from_table = table_status(status);
        first_option = 5;
#else
        fail(2, "this driver was built without a selection table (-DPDGEQRF_SELECTION_TABLE)", 0);
        return 2;
#endif
    } else {
        if (argc < 8) fail(2, "usage: pdgeqrf_driver M N MB NB P Q REPEATS [--check] [--corrupt] [--seed S]", argc);
        m = (int)parse_long(argv[1], "M is not an integer");
        n = (int)parse_long(argv[2], "N is not an integer");
        mb = (int)parse_long(argv[3], "MB is not an integer");
        nb = (int)parse_long(argv[4], "NB is not an integer");
        p = (int)parse_long(argv[5], "P is not an integer");
        q = (int)parse_long(argv[6], "Q is not an integer");
        repeats = (int)parse_long(argv[7], "REPEATS is not an integer");
        first_option = 8;
    }
    int check = 0, corrupt = 0;
    uint64_t seed = 1;
    for (int k = first_option; k < argc; k++) {
        if (strcmp(argv[k], "--check") == 0) check = 1;
        else if (strcmp(argv[k], "--corrupt") == 0) corrupt = 1;
        else if (strcmp(argv[k], "--seed") == 0 && k + 1 < argc) seed = (uint64_t)parse_long(argv[++k], "seed is not an integer");
        else fail(2, "unknown option", k);
    }
    if (m < 1) fail(2, "M must be >= 1", m);
    if (n < 1) fail(2, "N must be >= 1", n);
    if (mb < 1) fail(2, "MB must be >= 1", mb);
    if (nb < 1) fail(2, "NB must be >= 1", nb);
    if (p < 1 || q < 1) fail(2, "P and Q must be >= 1", p < 1 ? p : q);
    if ((long)p * q != size) fail(2, "P * Q must equal the number of MPI ranks", size);
    if (repeats < 1) fail(2, "REPEATS must be >= 1", repeats);

    int ictxt, myrow, mycol, nprow, npcol;
    Cblacs_get(-1, 0, &ictxt);
    Cblacs_gridinit(&ictxt, "Row", p, q);
    Cblacs_gridinfo(ictxt, &nprow, &npcol, &myrow, &mycol);

    const int izero = 0, ione = 1;
    int mloc = numroc_(&m, &mb, &myrow, &izero, &nprow);
    int nloc = numroc_(&n, &nb, &mycol, &izero, &npcol);
    int lld = mloc > 1 ? mloc : 1;
    int desc[9], info;
    descinit_(desc, &m, &n, &mb, &nb, &izero, &izero, &ictxt, &lld, &info);
    if (info != 0) fail(2, "DESCINIT rejected the descriptor (INFO)", info);

    size_t nel = (size_t)lld * (size_t)(nloc > 0 ? nloc : 1);
    double *a0 = malloc(nel * sizeof(double));
    double *a = malloc(nel * sizeof(double));
    int ntau = numroc_(&n, &nb, &mycol, &izero, &npcol) + nb;
    double *tau = malloc((size_t)ntau * sizeof(double));
    if (!a0 || !a || !tau) fail(3, "out of memory for the local matrix", (long)nel);
    for (long jl = 0; jl < nloc; jl++) {
        long j = global_index(jl, nb, mycol, npcol);
        for (long il = 0; il < mloc; il++) {
            long i = global_index(il, mb, myrow, nprow);
            a0[il + jl * (long)lld] = entry(seed, (uint64_t)i, (uint64_t)j);
        }
    }

    /* Workspace query. */
    double wq;
    int lwork = -1;
    memcpy(a, a0, nel * sizeof(double));
    pdgeqrf_(&m, &n, a, &ione, &ione, desc, tau, &wq, &lwork, &info);
    if (info != 0) fail(3, "PDGEQRF workspace query failed (INFO)", info);
    lwork = (int)wq + 1;
    double *work = malloc((size_t)lwork * sizeof(double));
    if (!work) fail(3, "out of memory for the PDGEQRF workspace", lwork);

    double *times = malloc((size_t)repeats * sizeof(double));
    if (!times) fail(3, "out of memory for the timings", repeats);
    /* bytes this process allocated for the factorisation; the largest over the processes is reported */
    double mine = (double)sizeof(double) * (2.0 * (double)nel + (double)ntau + (double)lwork + (double)repeats);
    double memory = 0.0, memory_check = 0.0;
    MPI_Allreduce(&mine, &memory, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double best = INFINITY;
    for (int r = 0; r < repeats; r++) {
        memcpy(a, a0, nel * sizeof(double));
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdgeqrf_(&m, &n, a, &ione, &ione, desc, tau, work, &lwork, &info);
        MPI_Barrier(MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, slowest;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (info != 0) fail(3, "PDGEQRF returned INFO != 0", info);
        times[r] = slowest;
        if (slowest < best) best = slowest;
    }

    double residual = -1.0, logabsdiag = 0.0;
    if (check) {
        /* sum_j log|R(j,j)|: for a square A this is log|det A|, an independent check (numpy). */
        int k = m < n ? m : n;
        double part = 0.0;
        for (long j = 0; j < k; j++) {
            if ((j / mb) % nprow != myrow || (j / nb) % npcol != mycol) continue;
            long il = (j / ((long)mb * nprow)) * mb + j % mb;
            long jl = (j / ((long)nb * npcol)) * nb + j % nb;
            part += log(fabs(a[il + jl * (long)lld]));
        }
        MPI_Allreduce(&part, &logabsdiag, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        /* R = upper triangle of the factored matrix (min(m,n) x n), zero elsewhere. */
        double *c = malloc(nel * sizeof(double));
        if (!c) fail(3, "out of memory for the residual check", (long)nel);
        memcpy(c, a, nel * sizeof(double));
        const double zero = 0.0, one = 1.0, minus_one = -1.0;
        if (m > 1) {
            int mm1 = m - 1, two = 2;
            pdlaset_("L", &mm1, &n, &zero, &zero, c, &two, &ione, desc);
        }
        if (corrupt) {
            /* Change R(1,1), held by process (0,0), by one percent of ||A||: a wrong factor. */
            if (myrow == 0 && mycol == 0) c[0] += 0.01 * sqrt((double)m * n / 12.0);
        }
        double wq2;
        int lwork2 = -1;
        pdormqr_("L", "N", &m, &n, &k, a, &ione, &ione, desc, tau, c, &ione, &ione, desc, &wq2, &lwork2, &info);
        if (info != 0) fail(3, "PDORMQR workspace query failed (INFO)", info);
        lwork2 = (int)wq2 + 1;
        double *work2 = malloc((size_t)lwork2 * sizeof(double));
        if (!work2) fail(3, "out of memory for the PDORMQR workspace", lwork2);
        double extra = (double)sizeof(double) * ((double)nel + (double)lwork2);
        MPI_Allreduce(&extra, &memory_check, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        pdormqr_("L", "N", &m, &n, &k, a, &ione, &ione, desc, tau, c, &ione, &ione, desc, work2, &lwork2, &info);
        if (info != 0) fail(3, "PDORMQR returned INFO != 0", info);
        /* c := c - a0 = QR - A */
        pdgeadd_("N", &m, &n, &minus_one, a0, &ione, &ione, desc, &one, c, &ione, &ione, desc);
        double err = pdlange_("F", &m, &n, c, &ione, &ione, desc, NULL);
        double anorm = pdlange_("F", &m, &n, a0, &ione, &ione, desc, NULL);
        int big = m > n ? m : n;
        residual = err / (anorm * big * DBL_EPSILON);
        free(work2);
        free(c);
    }

    if (g_rank == 0) {
        printf("{\"time\": %.9g, \"times\": [", best);
        for (int r = 0; r < repeats; r++) printf("%s%.9g", r ? ", " : "", times[r]);
        printf("], \"m\": %d, \"n\": %d, \"mb\": %d, \"nb\": %d, \"p\": %d, \"q\": %d, \"nproc\": %d",
               m, n, mb, nb, p, q, size);
        const char *nth = getenv("OPENBLAS_NUM_THREADS");
        printf(", \"openblas_num_threads\": \"%s\"", nth ? nth : "");
        printf(", \"memory\": %.0f, \"memory_check\": %.0f, \"local_rows\": %d, \"local_cols\": %d, \"lwork\": %d",
               memory, memory_check, mloc, nloc, lwork);
        if (check) printf(", \"residual\": %.6g, \"logabsdiag_r\": %.15g, \"check_passed\": %s", residual, logabsdiag,
                          (residual >= 0.0 && residual <= RESIDUAL_LIMIT) ? "true" : "false");
        if (corrupt) printf(", \"corrupted\": true");
        if (from_table) printf(", \"from_table\": \"%s\"", from_table);
        printf("}\n");
        fflush(stdout);
    }
    free(times);
    free(work);
    free(tau);
    free(a);
    free(a0);
    Cblacs_gridexit(ictxt);
    Cblacs_exit(1);
    MPI_Finalize();
    return 0;
}
