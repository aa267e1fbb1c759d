/* The bare per-turn loop `leakloop bench overhead` compares leakloop against: the same
 * LiteRT-LM C API calls leakloop's litert-lm backend makes for one chat turn (open a
 * conversation, send one user message, generate, count the reply's tokens, close), with nothing
 * around them. The library is opened with dlopen, so no header is needed; the signatures are
 * those of the handle-returning C API (LiteRT-LM 0.18 and earlier).
 *
 * usage: litert_lm_turns LIB MODEL CACHE_DIR MAX_TOKENS MAX_OUTPUT PROMPT WARMUP THREADS TRIPS
 * THREADS: the CPU backend's threads (litert_lm_engine_settings_set_num_threads), 0 for the
 * library's own choice.
 * TRIPS: 0 for the bare loop. More than 0 makes it the least an out-of-process sampler costs:
 * after each turn's close it reads its allocator's statistics (mallinfo2, as leakloop's worker
 * does for `native_heap`) and makes TRIPS round trips over a pipe to a second process, the last
 * of which reads this process's /proc/PID/statm (as leakloop's runner does for `rss`). That
 * time is in the turn's wall time, outside its steps.
 * After loading the engine and running WARMUP turns it prints `ready`; then each line N read
 * from stdin runs N more turns and prints `seconds=<wall time of those turns> tokens=<count>
 * open=<seconds> generate=<seconds> close=<seconds>`: the time of each step summed over the N
 * turns, split where leakloop times its steps (open: the configs and the conversation;
 * generate: the message, its reply and the count of its tokens; close: the delete).
 * It unloads and exits at the end of stdin. The benchmark runs these blocks of turns in
 * alternation with leakloop's, so that both loops see the same moments of a shared machine.
 * Built at bench time: cc -O2 -o litert_lm_turns litert_lm_turns.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void *(*settings_create_fn)(const char *, const char *, const char *, const char *);
typedef void (*settings_set_int_fn)(void *, int);
typedef void (*settings_set_str_fn)(void *, const char *);
typedef void *(*create_from_fn)(void *);
typedef void *(*create_fn)(void);
typedef void (*delete_fn)(void *);
typedef void (*set_int_fn)(void *, int);
typedef void (*set_ptr_fn)(void *, const void *);
typedef void *(*conversation_create_fn)(void *, void *);
typedef void *(*send_message_fn)(void *, const char *, const char *, const void *);
typedef const char *(*get_string_fn)(const void *);
typedef void *(*tokenize_fn)(void *, const char *);
typedef size_t (*num_tokens_fn)(const void *);
typedef void (*log_level_fn)(int);

static void *lib;

static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "missing function %s\n", name);
        exit(3);
    }
    return f;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The reply's text: the first "text":"..." (or "content":"...") string of the JSON, unescaped
 * only as far as counting its tokens needs. */
static char *reply_text(const char *json) {
    const char *keys[] = {"\"text\":\"", "\"content\":\""};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(json, keys[k]);
        if (!p) continue;
        p += strlen(keys[k]);
        size_t n = 0;
        char *out = malloc(strlen(p) + 1);
        for (; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1]) p++;
            out[n++] = *p;
        }
        out[n] = 0;
        return out;
    }
    return strdup("");
}

static create_fn session_config_create;
static set_int_fn session_config_set_max_output;
static delete_fn session_config_delete;
static create_fn conversation_config_create;
static set_ptr_fn conversation_config_set_session;
static delete_fn conversation_config_delete;
static conversation_create_fn conversation_create;
static delete_fn conversation_delete;
static create_fn optional_args_create;
static set_int_fn optional_args_set_max;
static delete_fn optional_args_delete;
static send_message_fn send_message;
static get_string_fn response_string;
static delete_fn response_delete;
static tokenize_fn tokenize;
static num_tokens_fn num_tokens;
static delete_fn tokenize_delete;

/* The sampler process's pipes (TRIPS > 0) and the round trips a turn makes to it. */
static int to_sampler = -1, from_sampler = -1, trips = 0;
/* Where the allocator's figure goes, so that reading it is not optimised away. */
static volatile size_t heap_seen;

/* Starts the second process (before the engine's threads exist): it answers each byte with one
 * byte, reading this process's statm first when the byte is 's', and ends at the end of its
 * input. 0 on success. */
static int start_sampler(void) {
    int requests[2], replies[2];
    if (pipe(requests) != 0 || pipe(replies) != 0) return 1;
    pid_t measured = getpid();
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        /* Only its own pipes: the loop's stdin and stdout stay the benchmark's alone. */
        close(STDIN_FILENO);
        close(STDOUT_FILENO);
        close(requests[1]);
        close(replies[0]);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/statm", (int)measured);
        int statm = open(path, O_RDONLY | O_CLOEXEC);
        if (statm < 0) {
            /* Said on the loop's stderr, which the benchmark shows when the loop then fails. */
            perror(path);
            _exit(1);
        }
        char request, figures[128];
        while (read(requests[0], &request, 1) == 1) {
            if (request == 's' && pread(statm, figures, sizeof figures, 0) <= 0) _exit(1);
            if (write(replies[1], &request, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    close(requests[0]);
    close(replies[1]);
    to_sampler = requests[1];
    from_sampler = replies[0];
    return 0;
}

/* One turn's sample: the allocator's statistics, then the round trips. 0 on success. */
static int sample_turn(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    heap_seen = mallinfo2().uordblks;
#endif
    for (int trip = 1; trip <= trips; trip++) {
        char request = trip == trips ? 's' : 'r', reply;
        if (write(to_sampler, &request, 1) != 1 || read(from_sampler, &reply, 1) != 1) return 1;
    }
    return 0;
}

/* Seconds spent in each step, summed over a block of turns. */
struct steps {
    double open, generate, close;
};

/* Runs `turns` chat turns, adding the replies' token counts to *tokens and each step's time to
 * *steps; 0 on success. */
static int run_turns(int turns, void *engine, const char *message, int max_output, size_t *tokens,
                     struct steps *steps) {
    for (int turn = 1; turn <= turns; turn++) {
        /* open */
        double t0 = now();
        void *session_config = session_config_create();
        session_config_set_max_output(session_config, max_output);
        void *conversation_config = conversation_config_create();
        conversation_config_set_session(conversation_config, session_config);
        void *conversation = conversation_create(engine, conversation_config);
        conversation_config_delete(conversation_config);
        session_config_delete(session_config);
        if (!conversation) return 3;
        /* generate */
        double t1 = now();
        void *args = optional_args_create();
        optional_args_set_max(args, max_output);
        void *response = send_message(conversation, message, "{}", args);
        if (!response) return 3;
        char *text = reply_text(response_string(response));
        response_delete(response);
        void *tokenized = tokenize(engine, text);
        if (tokenized) {
            *tokens += num_tokens(tokenized);
            tokenize_delete(tokenized);
        }
        free(text);
        optional_args_delete(args);
        /* close */
        double t2 = now();
        conversation_delete(conversation);
        double t3 = now();
        steps->open += t1 - t0;
        steps->generate += t2 - t1;
        steps->close += t3 - t2;
        if (trips > 0 && sample_turn() != 0) return 3;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr,
                "usage: %s LIB MODEL CACHE_DIR MAX_TOKENS MAX_OUTPUT PROMPT WARMUP THREADS TRIPS\n",
                argv[0]);
        return 2;
    }
    const char *model = argv[2], *cache = argv[3], *prompt = argv[6];
    int max_tokens = atoi(argv[4]), max_output = atoi(argv[5]);
    int warmup = atoi(argv[7]), threads = atoi(argv[8]);
    trips = atoi(argv[9]);
    if (trips > 0 && start_sampler() != 0) {
        perror("starting the sampler process");
        return 3;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], dlerror());
        return 3;
    }
    if (dlsym(lib, "litert_lm_get_api_version")) {
        fprintf(stderr, "%s speaks the status-returning C API; this loop drives 0.18 and earlier\n", argv[1]);
        return 4;
    }
    ((log_level_fn)sym("litert_lm_set_min_log_level"))(4);
    settings_create_fn settings_create = (settings_create_fn)sym("litert_lm_engine_settings_create");
    void *settings = settings_create(model, "cpu", NULL, NULL);
    if (!settings) return 3;
    ((settings_set_int_fn)sym("litert_lm_engine_settings_set_max_num_tokens"))(settings, max_tokens);
    ((settings_set_str_fn)sym("litert_lm_engine_settings_set_cache_dir"))(settings, cache);
    if (threads > 0)
        ((settings_set_int_fn)sym("litert_lm_engine_settings_set_num_threads"))(settings, threads);
    void *engine = ((create_from_fn)sym("litert_lm_engine_create"))(settings);
    ((delete_fn)sym("litert_lm_engine_settings_delete"))(settings);
    if (!engine) return 3;

    session_config_create = (create_fn)sym("litert_lm_session_config_create");
    session_config_set_max_output = (set_int_fn)sym("litert_lm_session_config_set_max_output_tokens");
    session_config_delete = (delete_fn)sym("litert_lm_session_config_delete");
    conversation_config_create = (create_fn)sym("litert_lm_conversation_config_create");
    conversation_config_set_session = (set_ptr_fn)sym("litert_lm_conversation_config_set_session_config");
    conversation_config_delete = (delete_fn)sym("litert_lm_conversation_config_delete");
    conversation_create = (conversation_create_fn)sym("litert_lm_conversation_create");
    conversation_delete = (delete_fn)sym("litert_lm_conversation_delete");
    optional_args_create = (create_fn)sym("litert_lm_conversation_optional_args_create");
    optional_args_set_max = (set_int_fn)sym("litert_lm_conversation_optional_args_set_max_output_tokens");
    optional_args_delete = (delete_fn)sym("litert_lm_conversation_optional_args_delete");
    send_message = (send_message_fn)sym("litert_lm_conversation_send_message");
    response_string = (get_string_fn)sym("litert_lm_json_response_get_string");
    response_delete = (delete_fn)sym("litert_lm_json_response_delete");
    tokenize = (tokenize_fn)sym("litert_lm_engine_tokenize");
    num_tokens = (num_tokens_fn)sym("litert_lm_tokenize_result_get_num_tokens");
    tokenize_delete = (delete_fn)sym("litert_lm_tokenize_result_delete");

    size_t message_len = strlen(prompt) + 64;
    char *message = malloc(message_len);
    snprintf(message, message_len, "{\"role\":\"user\",\"content\":\"%s\"}", prompt);
    size_t tokens = 0;
    struct steps steps = {0, 0, 0};
    if (run_turns(warmup, engine, message, max_output, &tokens, &steps) != 0) return 3;
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        int turns = atoi(line);
        tokens = 0;
        steps = (struct steps){0, 0, 0};
        double started = now();
        if (run_turns(turns, engine, message, max_output, &tokens, &steps) != 0) return 3;
        double seconds = now() - started;
        printf("seconds=%.6f tokens=%zu open=%.6f generate=%.6f close=%.6f\n", seconds, tokens,
               steps.open, steps.generate, steps.close);
        fflush(stdout);
    }
    ((delete_fn)sym("litert_lm_engine_delete"))(engine);
    free(message);
    return 0;
}
