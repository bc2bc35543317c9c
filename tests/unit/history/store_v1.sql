-- A history store as commbench wrote it before the alltoallv split identity (schema 1):
-- one run, one allreduce point; made with add_runs and dumped with sqlite3's iterdump.
BEGIN TRANSACTION;
CREATE TABLE commbench_entities (
	id INTEGER NOT NULL, 
	run_id VARCHAR(255) NOT NULL, 
	level VARCHAR(16) NOT NULL, 
	entity TEXT NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	hosts TEXT NOT NULL, 
	busbw_ratio FLOAT, 
	lat_ratio FLOAT, 
	verdict VARCHAR(32) NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_id) REFERENCES commbench_runs (run_id)
);
CREATE TABLE commbench_info (
	"key" VARCHAR(64) NOT NULL, 
	value VARCHAR(200) NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "commbench_info" VALUES('schema_version','1');
INSERT INTO "commbench_info" VALUES('created','2026-11-02T03:00:00+00:00');
CREATE TABLE commbench_points (
	id INTEGER NOT NULL, 
	run_id VARCHAR(255) NOT NULL, 
	op VARCHAR(64) NOT NULL, 
	variant VARCHAR(128) NOT NULL, 
	size_bytes BIGINT NOT NULL, 
	backend VARCHAR(32) NOT NULL, 
	dtype VARCHAR(32) NOT NULL, 
	world_size INTEGER NOT NULL, 
	dim VARCHAR(32) NOT NULL, 
	lat_us FLOAT NOT NULL, 
	lat_ci_lo FLOAT, 
	lat_ci_hi FLOAT, 
	busbw_gbps FLOAT, 
	algbw_gbps FLOAT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_id) REFERENCES commbench_runs (run_id)
);
INSERT INTO "commbench_points" VALUES(1,'old-night','allreduce','',8,'gloo','float32',2,'',3.00208507360339808649e+02,2.98254358032004404325e+02,3.02199457849373516178e+02,2.6648145551710210484e-05,2.6648145551710210484e-05);
CREATE TABLE commbench_runs (
	run_id VARCHAR(255) NOT NULL, 
	start_time VARCHAR(32) NOT NULL, 
	added_time VARCHAR(32) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	cluster TEXT NOT NULL, 
	"commit" VARCHAR(64) NOT NULL, 
	torch VARCHAR(64) NOT NULL, 
	nccl VARCHAR(64) NOT NULL, 
	commbench VARCHAR(64) NOT NULL, 
	world_size INTEGER NOT NULL, 
	backend VARCHAR(64) NOT NULL, 
	hosts TEXT NOT NULL, 
	path TEXT NOT NULL, 
	PRIMARY KEY (run_id)
);
INSERT INTO "commbench_runs" VALUES('old-night','2026-11-02T02:00:00+00:00','2026-11-02T03:00:00+00:00','complete','sweep','ci-runner','','2.13.0+cpu','','0.1.0',2,'gloo','ci-runner','/runs/old-night');
CREATE INDEX ix_commbench_runs_start_time ON commbench_runs (start_time);
CREATE INDEX ix_commbench_points_run_id ON commbench_points (run_id);
CREATE INDEX ix_commbench_entities_run_id ON commbench_entities (run_id);
COMMIT;
