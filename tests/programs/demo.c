/* The README demo: worker threads fill a shared table of particles; main walks the table calling
 * step_particle() in a loop. Gives a debugger a struct, an array, threads and a hot function to
 * break on or trace.  Usage: demo [iterations (default 1000)] [microseconds between steps (default 1000)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NPARTICLES 8
#define NWORKERS 2

struct vec {
  double x, y;
};

struct particle {
  int id;
  char name[16];
  struct vec pos;
  struct vec vel;
  long hits;
};

struct particle particles[NPARTICLES];
long total_steps;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Advances one particle; the function to `break` on or `trace`. Returns the new hit count. */
long step_particle(struct particle *p, int tick) {
  p->pos.x += p->vel.x;
  p->pos.y += p->vel.y;
  if (p->pos.x < 0 || p->pos.x > 100) p->vel.x = -p->vel.x;
  if (p->pos.y < 0 || p->pos.y > 100) p->vel.y = -p->vel.y;
  p->hits += tick % 3 == 0;
  total_steps++;
  return p->hits;
}

static void *worker(void *arg) {
  int first = (int)(long)arg;
  for (int i = first; i < NPARTICLES; i += NWORKERS) {
    pthread_mutex_lock(&table_lock);
    particles[i].id = i;
    snprintf(particles[i].name, sizeof particles[i].name, "particle-%d", i);
    particles[i].pos = (struct vec){i * 10.0, i * 5.0};
    particles[i].vel = (struct vec){1.5 + i, 0.5 * i};
    pthread_mutex_unlock(&table_lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000;
  long delay_us = argc > 2 ? atol(argv[2]) : 1000;
  pthread_t threads[NWORKERS];

  for (long w = 0; w < NWORKERS; w++) pthread_create(&threads[w], NULL, worker, (void *)w);
  for (int w = 0; w < NWORKERS; w++) pthread_join(threads[w], NULL);

  long checksum = 0;
  for (long tick = 0; tick < iterations; tick++) {
    struct particle *p = &particles[tick % NPARTICLES];
    checksum += step_particle(p, (int)tick);
    if (delay_us > 0) usleep(delay_us);
  }
  printf("demo done: %ld steps, checksum %ld\n", total_steps, checksum);
  return 0;
}
