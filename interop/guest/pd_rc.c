/*
 * pd_rc: one RC QP, one message, the retry attributes given on the command line: the rxe guest's
 * half of the interop suite's RNR / timeout / retry cases (WireFaultsConformanceTest). The project's
 * own half is RcProbe.java, which does the same steps with peerdirect's verbs.
 *
 * Out of band it speaks ibv_rc_pingpong's exchange (rdma-core libibverbs/examples/pingpong.c and
 * rc_pingpong.c): the client sends "%04x:%06x:%06x:<32 hex GID>\0" (52 bytes), the server moves its
 * QP to RTR/RTS and answers with its own, the client connects and sends "done\0". Then:
 *   -r send  posts one signaled SEND of -s bytes and waits for its completion;
 *   -r recv  posts one receive after -w ms (-1: never) and waits for a message or for the peer's end;
 * each side prints "PDRC <role> status=<ibv_wc_status> (<name>)" (or "status=none"); the requester
 * then sends "fin\0" and waits for the responder's, the responder keeps its QP until the requester's
 * "fin" (so retransmissions meet a QP: duplicates) and answers it; a responder that never posts
 * learns from it that the requester is done.
 *
 * Usage: pd_rc [-d dev] [-g gid_index] [-p tcp_port] [-s size] [-r send|recv] [-R rnr_retry]
 *              [-C retry_cnt] [-t timeout] [-m min_rnr_timer] [-w post_recv_ms] [-W wait_ms] [host]
 *        (with host: the exchange's client; without: its server)
 * Built on the host against Debian's libibverbs-dev (interop/guest/build-guest.sh), run in the guest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG_LEN 52

static void die(const char *what)
{
	fprintf(stderr, "pd_rc: %s: %s\n", what, strerror(errno));
	printf("PDRC error %s\n", what);
	fflush(stdout);
	exit(1);
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* gid_to_wire_gid / wire_gid_to_gid of pingpong.c: the GID's bytes in order, 32 hex digits */
static void gid_to_hex(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static void hex_to_gid(const char *in, union ibv_gid *g)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(in + 2 * i, "%2x", &v);
		g->raw[i] = v;
	}
}

static int tcp_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	char service[8];
	snprintf(service, sizeof service, "%d", port);
	if (getaddrinfo(host, service, &hints, &res))
		die("getaddrinfo");
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, res->ai_addr, res->ai_addrlen))
		die("connect");
	freeaddrinfo(res);
	return s;
}

static int tcp_accept(int port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
		die("listen");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept");
	close(l);
	return s;
}

static void read_full(int s, char *buf, int n)
{
	for (int got = 0; got < n;) {
		int r = read(s, buf + got, n - got);
		if (r <= 0)
			die("out-of-band read");
		got += r;
	}
}

struct dest {
	int lid, qpn, psn;
	union ibv_gid gid;
};

static void connect_qp(struct ibv_qp *qp, const struct dest *my, const struct dest *rem, int gidx, int min_rnr, int timeout,
		       int retry_cnt, int rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = rem->qpn, .rq_psn = rem->psn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = min_rnr,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .hop_limit = 1, .dgid = rem->gid, .sgid_index = gidx } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = my->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				      IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS");
}

/* the command line */
static struct {
	const char *devname, *role, *host;
	int gidx, port, size, rnr_retry, retry_cnt, timeout, min_rnr, post_ms, wait_ms, sending;
} o = { "rxe0", "send", NULL, 1, 18515, 64, 7, 7, 14, 12, 0, 30000, 1 };

/* one verbs context's objects: a CQ of 4, an RC QP of one send and one receive, a registered buffer */
struct res {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	char *buf;
};

static void open_res(struct res *r)
{
	struct ibv_device *dev = NULL;
	r->list = ibv_get_device_list(NULL);
	for (int i = 0; r->list && r->list[i]; i++)
		if (!strcmp(ibv_get_device_name(r->list[i]), o.devname))
			dev = r->list[i];
	if (!dev)
		die("no such device");
	r->ctx = ibv_open_device(dev);
	r->pd = r->ctx ? ibv_alloc_pd(r->ctx) : NULL;
	r->buf = calloc(1, o.size);
	r->mr = r->pd ? ibv_reg_mr(r->pd, r->buf, o.size, IBV_ACCESS_LOCAL_WRITE) : NULL;
	r->cq = r->mr ? ibv_create_cq(r->ctx, 4, NULL, NULL, 0) : NULL;
	if (!r->cq)
		die("device, PD, MR or CQ");
	struct ibv_qp_init_attr ia = { .send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	r->qp = ibv_create_qp(r->pd, &ia);
	if (!r->qp)
		die("create QP");
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	if (ibv_modify_qp(r->qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify QP to INIT");
}

static void close_res(struct res *r)
{
	ibv_destroy_qp(r->qp);
	ibv_destroy_cq(r->cq);
	ibv_dereg_mr(r->mr);
	ibv_dealloc_pd(r->pd);
	ibv_close_device(r->ctx);
	ibv_free_device_list(r->list);
	free(r->buf);
}

/* the one receive; posted by the exchange when due at once (before the requester may send), else by run() */
static int posted;

static void post_recv(struct res *r, long after_ms)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->buf, .length = o.size, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(r->qp, &wr, &bad))
		die("post recv");
	posted = 1;
	printf("PDRC recv posted after %ld ms\n", after_ms);
	fflush(stdout);
}

/* rc_pingpong's exchange, the QP connected in the middle of it; returns the socket, kept for the "fin"s */
static int exchange(struct res *r)
{
	srand48(getpid() * time(NULL));
	struct dest my = { .qpn = r->qp->qp_num, .psn = lrand48() & 0xffffff }, rem;
	if (ibv_query_gid(r->ctx, 1, o.gidx, &my.gid))
		die("query GID");
	char msg[MSG_LEN], gid[33], in[MSG_LEN];
	gid_to_hex(&my.gid, gid);
	snprintf(msg, sizeof msg, "%04x:%06x:%06x:%s", 0, my.qpn, my.psn, gid);
	printf("PDRC local qpn=%06x psn=%06x\n", my.qpn, my.psn);
	fflush(stdout);
	int s = o.host ? tcp_connect(o.host, o.port) : tcp_accept(o.port);
	if (o.host && write(s, msg, MSG_LEN) != MSG_LEN)
		die("out-of-band write");
	read_full(s, in, MSG_LEN);
	sscanf(in, "%x:%x:%x:%32s", &rem.lid, &rem.qpn, &rem.psn, gid);
	hex_to_gid(gid, &rem.gid);
	connect_qp(r->qp, &my, &rem, o.gidx, o.min_rnr, o.timeout, o.retry_cnt, o.rnr_retry);
	if (!o.sending && o.post_ms == 0)
		post_recv(r, 0); /* before the "done" that lets the requester send: "at once" must not race its SEND */
	if (o.host) {
		if (write(s, "done", 5) != 5)
			die("out-of-band write");
	} else {
		if (write(s, msg, MSG_LEN) != MSG_LEN)
			die("out-of-band write");
		read_full(s, in, 5); /* "done": the client's QP is at RTR, a SEND now reaches it */
	}
	printf("PDRC remote qpn=%06x psn=%06x\n", rem.qpn, rem.psn);
	fflush(stdout);
	return s;
}

/* the message: the requester's SEND and its completion, or the responder's (late) receive and the
 * message or the requester's "fin"; prints the result line, returns whether the requester is done */
static int run(struct res *r, int s, long t0)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->buf, .length = o.size, .lkey = r->mr->lkey };
	if (o.sending) {
		memset(r->buf, 0x5a, o.size);
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		if (ibv_post_send(r->qp, &wr, &bad))
			die("post send");
	}
	struct ibv_wc wc;
	int n = 0, peer_done = 0;
	while (now_ms() - t0 < o.wait_ms) {
		if (!o.sending && !posted && o.post_ms >= 0 && now_ms() - t0 >= o.post_ms)
			post_recv(r, now_ms() - t0);
		n = ibv_poll_cq(r->cq, 1, &wc);
		if (n)
			break;
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (!o.sending && poll(&p, 1, 1) > 0) {
			/* the requester's "fin": no message is coming, or it completed while we waited here */
			peer_done = 1;
			n = ibv_poll_cq(r->cq, 1, &wc);
			break;
		}
		if (o.sending)
			usleep(1000);
	}
	if (n < 0)
		die("poll CQ");
	if (n)
		printf("PDRC %s status=%d (%s) after %ld ms\n", o.role, wc.status, ibv_wc_status_str(wc.status), now_ms() - t0);
	else
		printf("PDRC %s status=none (%s) after %ld ms\n", o.role, peer_done ? "the requester ended" : "timed out", now_ms() - t0);
	fflush(stdout);
	return peer_done;
}

/* the requester sends "fin" and waits for the responder's (both sides' counters final); the
 * responder keeps its QP until the requester's "fin" (retransmissions meet a QP: duplicates), then answers */
static void fin(int s, int peer_done, long t0)
{
	char buf[4];
	if (o.sending) {
		if (write(s, "fin", 4) != 4)
			fprintf(stderr, "pd_rc: the peer left before our fin\n");
		if (read(s, buf, sizeof buf) < 0)
			fprintf(stderr, "pd_rc: no fin from the peer\n");
		return;
	}
	struct pollfd p = { .fd = s, .events = POLLIN };
	long left = o.wait_ms - (now_ms() - t0);
	if (!peer_done && poll(&p, 1, left > 0 ? left : 0) <= 0)
		fprintf(stderr, "pd_rc: no fin from the requester\n");
	if (write(s, "fin", 4) != 4)
		fprintf(stderr, "pd_rc: the peer left before our fin\n");
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "d:g:p:s:r:R:C:t:m:w:W:")) != -1) {
		switch (c) {
		case 'd': o.devname = optarg; break;
		case 'g': o.gidx = atoi(optarg); break;
		case 'p': o.port = atoi(optarg); break;
		case 's': o.size = atoi(optarg); break;
		case 'r': o.role = optarg; break;
		case 'R': o.rnr_retry = atoi(optarg); break;
		case 'C': o.retry_cnt = atoi(optarg); break;
		case 't': o.timeout = atoi(optarg); break;
		case 'm': o.min_rnr = atoi(optarg); break;
		case 'w': o.post_ms = atoi(optarg); break;
		case 'W': o.wait_ms = atoi(optarg); break;
		default: fprintf(stderr, "pd_rc: unknown option\n"); return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN); /* a peer gone before our "fin": the write fails, the run's result stands */
	o.sending = strcmp(o.role, "send") == 0;
	if (!o.sending && strcmp(o.role, "recv") != 0) {
		fprintf(stderr, "pd_rc: -r is send or recv, not '%s'\n", o.role);
		return 2;
	}
	if (o.size < 1 || o.size > 1024) {
		fprintf(stderr, "pd_rc: -s %d is not 1..1024 (one packet at path MTU 1024)\n", o.size);
		return 2;
	}
	o.host = optind < argc ? argv[optind] : NULL; /* a client connects to it; none: the server */
	struct res r;
	open_res(&r);
	int s = exchange(&r);
	long t0 = now_ms();
	fin(s, run(&r, s, t0), t0);
	close(s);
	close_res(&r);
	return 0;
}
